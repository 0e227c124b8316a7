/** Loopback ports for test servers. */
import { type AddressInfo, createServer } from 'node:net';

/** A loopback port nothing listens on now (just closed): for a server started a moment later, or for "unreachable" checks. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
