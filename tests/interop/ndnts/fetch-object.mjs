// node fetch-object.mjs PREFIX OUTFILE
// Discovers the newest version under PREFIX, fetches every segment (NDNts's pipelined fetcher,
// TCP-CUBIC congestion control, retransmissions), writes the object to OUTFILE and prints
//   FETCHED <versioned name> <bytes> <segments> <milliseconds>   or   FAILED <message>
import { writeFile } from "node:fs/promises";

import { Name } from "@ndn/packet";
import { discoverVersion, fetch } from "@ndn/segmented-object";

import { connect, deadline } from "./common.mjs";

const [, , prefix, out] = process.argv;
deadline(Number(process.env.NDNTS_FETCH_DEADLINE_MS ?? 60000));
const face = await connect();
const t0 = performance.now();
try {
  const versioned = await discoverVersion(new Name(prefix));
  const result = fetch(versioned, { retxLimit: 10 });
  const bytes = await result;
  await writeFile(out, bytes);
  const ms = Math.round(performance.now() - t0);
  console.log(`FETCHED ${versioned} ${bytes.length} ${result.count} ${ms}`);
} catch (err) {
  console.log(`FAILED ${err.message}`);
}
face.close();
process.exit(0);
