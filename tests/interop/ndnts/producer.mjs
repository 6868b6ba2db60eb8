// node producer.mjs PREFIX
// Registers PREFIX with the forwarder and answers every Interest under it with
// Data(name=Interest name, content="hello from PREFIX", FreshnessPeriod=1s), DigestSha256-signed.
import { produce } from "@ndn/endpoint";
import { Data, digestSigning, Name } from "@ndn/packet";

import { connect } from "./common.mjs";

const prefix = new Name(process.argv[2]);
const face = await connect({ register: true });
const producer = produce(prefix, async (interest) => {
  console.log(`INTEREST ${interest.name}`);
  const data = new Data(interest.name, Data.FreshnessPeriod(1000),
    new TextEncoder().encode(`hello from ${process.argv[2]}`));
  await digestSigning.sign(data);
  return data;
});

const stop = () => {
  producer.close();
  face.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
