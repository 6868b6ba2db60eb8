// node mgmt.mjs
// Drives the forwarder's NFD management like an nfdc written with NDNts would, and prints one
// JSON object per line: {"step": ..., ...}. The test checks each step.
import { Name } from "@ndn/packet";
import {
  ControlParameters, FaceStatus, GeneralStatus, invoke, list, RibEntry, StrategyChoice,
} from "@ndn/nfdmgmt";

import { connect, deadline } from "./common.mjs";

deadline(30000);
const face = await connect();
const out = (step, obj) => console.log(JSON.stringify({ step, ...obj },
  (k, v) => (typeof v === "bigint" ? Number(v) : v)));
const prefix = new Name("/nfdc/test");
const routesOf = async () => (await list(RibEntry))
  .filter((e) => e.name.equals(prefix))
  .flatMap((e) => e.route.map(({ faceId, origin, cost, flags, expirationPeriod }) =>
    ({ faceId, origin, cost, flags, expirationPeriod })));
const reply = (step, cr) => {
  const r = { code: cr.statusCode, text: cr.statusText };
  if (cr.body.length > 0) {
    const cp = ControlParameters.decodeFromResponseBody(cr);
    Object.assign(r, { name: cp.name?.toString(), faceId: cp.faceId, origin: cp.origin,
      cost: cp.cost, flags: cp.flags, expirationPeriod: cp.expirationPeriod });
  }
  out(step, r);
};

try {
  const general = await list(GeneralStatus);
  out("general", { n: general.length, nfdVersion: general[0]?.nfdVersion,
    nFibEntries: general[0]?.nFibEntries });

  reply("register", await invoke("rib/register",
    { name: prefix, origin: 255, cost: 7, expirationPeriod: 60000 }));
  out("routes-after-register", { routes: await routesOf() });

  const faces = await list(FaceStatus);
  out("faces", { faces: faces.map(({ faceId, uri, localUri, faceScope }) =>
    ({ faceId, uri, localUri, faceScope })) });

  const choices = await list(StrategyChoice);
  out("strategies", { choices: choices.map(({ name, strategy }) =>
    ({ name: name.toString(), strategy: strategy.toString() })) });

  reply("unregister", await invoke("rib/unregister", { name: prefix, origin: 255 }));
  out("routes-after-unregister", { routes: await routesOf() });

  reply("bad-strategy", await invoke("strategy-choice/set",
    { name: prefix, strategy: new Name("/localhost/nfd/strategy/no-such-strategy") }));
  out("done", {});
} catch (err) {
  out("error", { message: String(err?.stack ?? err) });
}
face.close();
process.exit(0);
