import net from "node:net";

/** The IPv6 prefix a client is counted by, unless RATE_LIMIT_IPV6_PREFIX says otherwise. */
export const DEFAULT_IPV6_PREFIX = 64;

/** The first 96 bits of an IPv4-mapped address (::ffff:0:0/96) and of a NAT64 one (64:ff9b::/96). */
const MAPPED = [0, 0, 0, 0, 0, 0xffff];
const NAT64 = [0x64, 0xff9b, 0, 0, 0, 0];

/**
 * The eight 16-bit groups of an IPv6 address in any of its spellings (compressed, leading
 * zeros, upper case, a dotted IPv4 tail), or undefined for anything else, a zone id included.
 */
function ipv6Groups(address: string): number[] | undefined {
  if (!net.isIPv6(address) || address.includes("%")) return undefined;
  let text = address;
  // A dotted IPv4 tail (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) is the last two groups.
  const tail = text.match(/^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (tail) {
    const [a, b, c, d] = tail.slice(2).map(Number) as [number, number, number, number];
    text = `${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return groups.map((group) => parseInt(group, 16));
}

/** The IPv4 address in the last 32 bits of `groups` when their first 96 bits are `first`. */
function embeddedIpv4(groups: number[], first: readonly number[]): string | undefined {
  if (!first.every((group, i) => groups[i] === group)) return undefined;
  return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join(".");
}

/**
 * The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:10.0.0.1, ::ffff:a00:1, the
 * long form), or undefined for any other text.
 */
export function mappedIpv4(address: string): string | undefined {
  const groups = ipv6Groups(address);
  return groups && embeddedIpv4(groups, MAPPED);
}

/** A client address as it is stored and matched: an IPv4-mapped IPv6 address is its IPv4 address. */
export function normalizeAddress(address: string): string {
  return mappedIpv4(address) ?? address;
}

/**
 * The network a client is counted as by the per-address limits: an IPv4 address on its
 * own, an IPv6 address by its first `ipv6Prefix` bits (/64 by default). One IPv6 host on
 * the internet is usually given a whole /64 (2^64 addresses to send from), so a limit per
 * IPv6 address would limit nothing; where many hosts share one /64 (a cloud subnet, a
 * cluster's pod network), RATE_LIMIT_IPV6_PREFIX=128 counts each address. An IPv4-mapped
 * address, and a NAT64 address (64:ff9b::/96, an IPv4 client seen through a translator),
 * is its IPv4 address; a zone id is left out. Anything that is not an address is
 * returned as it is. No address at all (the client went away, and its socket with it,
 * while the request waited): "unknown", counted as one network.
 */
export function addressNetwork(address: string | undefined, ipv6Prefix = DEFAULT_IPV6_PREFIX): string {
  if (address === undefined) return "unknown";
  if (net.isIPv4(address)) return address;
  const groups = ipv6Groups(address.split("%")[0]!);
  if (!groups) return address;
  const ipv4 = embeddedIpv4(groups, MAPPED) ?? embeddedIpv4(groups, NAT64);
  if (ipv4) return ipv4;
  const masked = groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, ipv6Prefix - 16 * i));
    return (group & (0xffff << (16 - bits)) & 0xffff).toString(16);
  });
  return `${masked.join(":")}/${ipv6Prefix}`;
}

/** A rate limit's key generator that counts `name` per client network (req.clientNetwork, see addressNetwork). */
export function perNetwork(name: string): (req: { clientNetwork: string }) => string {
  return (req) => `${name}:${req.clientNetwork}`;
}
