import net from "node:net";

/**
 * The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:10.0.0.1, ::ffff:a00:1, the
 * long form), or undefined for any other text. Read from the URL parser's canonical form,
 * so every spelling of the same address gives the same answer.
 */
export function mappedIpv4(address: string): string | undefined {
  if (!net.isIPv6(address) || address.includes("%")) return undefined;
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]`).hostname;
  } catch {
    return undefined;
  }
  const match = canonical.match(/^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/);
  if (!match) return undefined;
  const high = parseInt(match[1]!, 16);
  const low = parseInt(match[2]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join(".");
}

/** A client address as it is stored and matched: an IPv4-mapped IPv6 address is its IPv4 address. */
export function normalizeAddress(address: string): string {
  return mappedIpv4(address) ?? address;
}

/**
 * The network a client is counted as by the per-address limits: an IPv4 address on its
 * own, an IPv6 address's /64. One IPv6 host is usually given a whole /64 (2^64 addresses
 * to send from), so a limit per IPv6 address would limit nothing; a /64 is what one
 * subscriber or one machine holds. An IPv4-mapped address is its IPv4 address; a zone id
 * is left out. Anything that is not an address is returned as it is.
 */
export function addressNetwork(address: string): string {
  const plain = normalizeAddress(address);
  if (!net.isIPv6(plain)) return plain;
  const groups = ipv6Groups(plain.split("%")[0]!);
  return groups ? `${groups.slice(0, 4).join(":")}::/64` : plain;
}

/** The eight groups of an IPv6 address, in lower-case hex without leading zeros. */
function ipv6Groups(address: string): string[] | undefined {
  let text = address.toLowerCase();
  // A dotted IPv4 tail (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) is the last two groups.
  const tail = text.match(/^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (tail) {
    const [a, b, c, d] = tail.slice(2).map(Number) as [number, number, number, number];
    text = `${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const missing = 8 - left.length - right.length;
  if (rest === undefined ? missing !== 0 : missing < 1) return undefined;
  const groups = [...left, ...Array<string>(rest === undefined ? 0 : missing).fill("0"), ...right];
  return groups.map((group) => parseInt(group, 16).toString(16));
}

/** A rate limit's key generator that counts `name` per client network (addressNetwork). */
export function perNetwork(name: string): (req: { ip: string }) => string {
  return (req) => `${name}:${addressNetwork(req.ip)}`;
}
