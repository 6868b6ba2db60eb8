// node serve-object.mjs PREFIX FILE
// Serves FILE as a versioned, segmented object under PREFIX (@ndn/segmented-object
// serveVersioned: /PREFIX/<version>/<segment>, CanBePrefix version discovery), registered with
// the forwarder. Prints READY once the prefix is registered.
import { readFile } from "node:fs/promises";

import { BufferChunkSource, serveVersioned } from "@ndn/segmented-object";

import { connect } from "./common.mjs";

const [, , prefix, file] = process.argv;
const bytes = await readFile(file);
const face = await connect({ register: true });
const server = serveVersioned(prefix, new BufferChunkSource(bytes, { chunkSize: 4096 }));
console.log(`SERVING ${server.prefix} ${bytes.length} bytes`);

const stop = () => {
  server.close();
  face.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
