// Shared by the NDNts interop scripts: connect to the forwarder named by NDN_CLIENT_TRANSPORT
// (the same variable python-ndn reads), the way an NDNts application would.
import { Forwarder } from "@ndn/fw";
import { enableNfdPrefixReg, NfdPrefixReg } from "@ndn/nfdmgmt";
import { TcpTransport, UnixTransport } from "@ndn/node-transport";

// Strict PIT-token matching: a Data that comes back without the PitToken its Interest carried
// is dropped, so the tests fail if the forwarder does not echo tokens. (This NDNts version
// falls back to name matching by default, which would hide a missing echo.)
Forwarder.replaceDefault(Forwarder.create({ dataNoTokenMatch: false }));

/** Prints "READY <prefix>" once the forwarder accepted the rib/register command. */
class ReportingPrefixReg extends NfdPrefixReg {
  async doAdvertise(name, state) {
    try {
      await super.doAdvertise(name, state);
    } catch (err) {
      console.log(`REGISTER-FAILED ${name} ${err}`);
      throw err; // NfdPrefixReg retries
    }
    console.log(`READY ${name}`);
  }
}

/**
 * Open a face to the forwarder. With register=true, prefixes announced by producers on this
 * process's logical forwarder are registered with /localhost/nfd/rib/register.
 */
export async function connect({ register = false } = {}) {
  const uri = process.env.NDN_CLIENT_TRANSPORT ?? "unix:///run/nfd/nfd.sock";
  const u = new URL(uri);
  let face;
  if (u.protocol === "unix:") {
    face = await UnixTransport.createFace({}, u.pathname);
  } else if (u.protocol === "tcp:" || u.protocol === "tcp4:") {
    face = await TcpTransport.createFace({}, u.hostname, Number(u.port || 6363));
  } else {
    throw new Error(`unsupported NDN_CLIENT_TRANSPORT ${uri}`);
  }
  if (register) {
    new ReportingPrefixReg(face, {}).enable(face.fw);
  }
  return face;
}

export { enableNfdPrefixReg };

/** Exit with `code` after `ms` milliseconds whatever happens (tests must never hang). */
export function deadline(ms, code = 3) {
  setTimeout(() => {
    console.log(`DEADLINE ${ms}ms`);
    process.exit(code);
  }, ms).unref();
}
