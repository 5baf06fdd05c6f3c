import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Auth } from "../core/auth.ts";
import { HttpError } from "../core/errors.ts";
import { INVITATION_NOT_FOUND } from "./invitations.service.ts";
import type { InboxService } from "./inbox.service.ts";

const Params = z.strictObject({ invitationId: z.uuid() });

interface Deps {
  auth: Auth;
  inbox: InboxService;
}

/** The caller's own pending invitations (Browser only, like the rest of api.md 4.6). */
export function registerInboxRoutes(app: FastifyInstance, { auth, inbox }: Deps): void {
  app.get("/api/invitations", { preHandler: auth.browser }, async (req) => inbox.list(auth.caller(req)));

  app.post(
    "/api/invitations/:invitationId/accept",
    { preHandler: auth.browser, config: { rateLimit: { max: 30, timeWindow: 60_000 } } },
    async (req) => {
      const params = Params.safeParse(req.params);
      if (!params.success) throw new HttpError(404, INVITATION_NOT_FOUND);
      return inbox.accept(auth.caller(req), params.data.invitationId);
    },
  );
}
