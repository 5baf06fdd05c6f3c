// One line per role, shown where a role is picked (invite form, role change) and where an
// invitation names one. Kept to what the server's role table grants (src/core/access.ts).
import type { Role } from "./api.ts";

export const ROLE_HELP: Record<Role, string> = {
  owner: "Everything, including deleting the project. There is one owner.",
  admin: "Every environment, plus members, invitations, environment access and integrations.",
  member: "Reads and changes secrets in the environments granted to them.",
  viewer: "Reads secrets in the environments granted to them; changes nothing.",
};

/** "a member", "an admin". */
export const withArticle = (role: string) => `${/^[aeiou]/.test(role) ? "an" : "a"} ${role}`;

/**
 * What an admin who becomes a member or viewer, is removed or leaves loses with the role
 * (src/lost-rights.ts): said before it is done, as a CI job's token stops working.
 */
export function adminLosses(who: "they" | "you"): string {
  return `Service tokens ${who} created are revoked, invitations ${who} sent are voided, and a Vercel sync that uses ${who === "you" ? "your" : "their"} token is paused.`;
}
