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

/** The IPv6 prefix a client is counted by, unless RATE_LIMIT_IPV6_PREFIX says otherwise. */
export const DEFAULT_IPV6_PREFIX = 64;

/**
 * The network a client is counted as by the per-address limits: an IPv4 address on its
 * own, an IPv6 address by its first `ipv6Prefix` bits (/64 by default). One IPv6 host on
 * the internet is usually given a whole /64 (2^64 addresses to send from), so a limit per
 * IPv6 address would limit nothing; where many hosts share one /64 (a cloud subnet, a
 * cluster's pod network), RATE_LIMIT_IPV6_PREFIX=128 counts each address. An IPv4-mapped
 * address, and a NAT64 address (64:ff9b::/96, an IPv4 client seen through a translator),
 * is its IPv4 address; a zone id is left out. Anything that is not an address is
 * returned as it is.
 */
export function addressNetwork(address: string, ipv6Prefix = DEFAULT_IPV6_PREFIX): string {
  const bare = address.split("%")[0]!;
  const plain = normalizeAddress(bare);
  if (!net.isIPv6(plain)) return plain === bare ? address : plain;
  const groups = ipv6Groups(plain);
  if (!groups) return address;
  if (groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((group) => group === 0)) {
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join(".");
  }
  const masked = groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, ipv6Prefix - 16 * i));
    return (group & (0xffff << (16 - bits)) & 0xffff).toString(16);
  });
  return `${masked.join(":")}/${ipv6Prefix}`;
}

/** The eight 16-bit groups of an IPv6 address (net.isIPv6 has accepted it). */
function ipv6Groups(address: string): number[] | undefined {
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
  return groups.map((group) => parseInt(group, 16));
}

/** A rate limit's key generator that counts `name` per client network (req.clientNetwork, see addressNetwork). */
export function perNetwork(name: string): (req: { clientNetwork: string }) => string {
  return (req) => `${name}:${req.clientNetwork}`;
}
