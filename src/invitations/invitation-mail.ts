import type { Transporter } from "nodemailer";
import type { Logger } from "pino";
import type { Config } from "../core/config.ts";
import { loggedMessage } from "../core/error-text.ts";
import type { DeliveryStatus, InvitationsRepo } from "./invitations.repo.ts";
import type { InvitationContext } from "./invitations.service.ts";

/** What invitations.service needs: send one invitation's link, record and return the outcome. */
export interface InvitationMailer {
  deliver(
    invitation: { id: string; projectId: string; email: string; role: string; expiresAt: string; invitedBy: string | null },
    acceptUrl: string,
  ): Promise<DeliveryStatus>;
}

const ROLE_WORDS: Record<string, string> = { admin: "an admin", member: "a member", viewer: "a viewer" };

/**
 * Invitation e-mail over SMTP_URL (nodemailer). The accept link carries the invitation
 * token, so it goes only into the message to the invited address: never into a log line,
 * an error, or the API response. A failure is logged (without the link) and recorded as
 * the invitation's delivery status, which the project's invitation list shows.
 */
export function createInvitationMailer(
  { repo, context }: { repo: Pick<InvitationsRepo, "setDeliveryStatus">; context: InvitationContext },
  config: Pick<Config, "smtp">,
  log: Pick<Logger, "info" | "warn">,
): InvitationMailer | undefined {
  if (!config.smtp) return undefined;
  const { url } = config.smtp;
  // nodemailer loads with the first invitation to send, not at every start (it took about
  // 15 ms of the executable's start).
  let transport: Promise<Transporter> | undefined;
  const transportOf = () =>
    (transport ??= import("nodemailer").then(({ default: nodemailer }) =>
      nodemailer.createTransport({
        url,
        // An admin waits for the answer of the invite request, so a dead mail server must fail fast.
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 20_000,
        logger: false,
      }),
    ));
  const from = config.smtp.from;

  async function send(invitation: Parameters<InvitationMailer["deliver"]>[0], acceptUrl: string): Promise<DeliveryStatus> {
    try {
      const found = await context(invitation.projectId, invitation.invitedBy);
      const projectName = found.projectName ?? "a project";
      const inviter = found.inviter?.name || found.inviter?.email || "Someone";
      const role = ROLE_WORDS[invitation.role] ?? invitation.role;
      await (await transportOf()).sendMail({
        from,
        to: invitation.email,
        subject: `${inviter} invited you to ${projectName}`,
        text: [
          `${inviter} invited you to the project "${projectName}" as ${role}.`,
          "",
          "To accept, open this link and sign in with this e-mail address:",
          "",
          `  ${acceptUrl}`,
          "",
          `The link works once and until ${invitation.expiresAt}. You can also accept the invitation`,
          "from the list shown after you sign in. If you did not expect it, ignore this e-mail.",
        ].join("\n"),
      });
      log.info({ invitationId: invitation.id }, "invitation e-mail sent");
      return "sent";
    } catch (error) {
      const e = error as NodeJS.ErrnoException & { responseCode?: number; command?: string };
      // The code and the server's reply, never the message body (it holds the link).
      log.warn(
        { invitationId: invitation.id, code: e.code, responseCode: e.responseCode, command: e.command },
        `invitation e-mail could not be sent: ${loggedMessage(e).slice(0, 200)}`,
      );
      return "failed";
    }
  }

  return {
    async deliver(invitation, acceptUrl) {
      const status = await send(invitation, acceptUrl);
      // The invitation is committed and the mail sent (or not) by now: a status that cannot
      // be recorded must not fail the request, whose retry would meet "already pending".
      try {
        await repo.setDeliveryStatus(invitation.id, status);
      } catch (error) {
        log.warn({ invitationId: invitation.id, error: loggedMessage(error) }, "the invitation e-mail's outcome could not be recorded");
      }
      return status;
    },
  };
}
