// node consumer.mjs NAME [LIFETIME_MS]
// Expresses one Interest and prints one line:
//   DATA <name> <content as UTF-8>  |  NACK <reason>  |  TIMEOUT <message>
import { consume } from "@ndn/endpoint";
import { Forwarder } from "@ndn/fw";
import { Interest, Nack } from "@ndn/packet";

import { connect, deadline } from "./common.mjs";

const lifetime = Number(process.argv[3] ?? 2000);
deadline(lifetime + 5000);
const face = await connect();

// NDNts's logical forwarder ignores Nacks (the consumer would only see its Interest expire),
// so watch the packets arriving from the forwarder's face to report a Nack.
Forwarder.getDefault().addEventListener("pktrx", ({ face: from, packet }) => {
  if (from === face && packet.l3 instanceof Nack) {
    console.log(`NACK ${packet.l3.reason}`);
    process.exit(0);
  }
});

const interest = new Interest(process.argv[2], Interest.Lifetime(lifetime));
try {
  const data = await consume(interest);
  console.log(`DATA ${data.name} ${new TextDecoder().decode(data.content)}`);
} catch (err) {
  console.log(`TIMEOUT ${err.message}`);
}
face.close();
process.exit(0);
