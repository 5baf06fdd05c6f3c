import { PAGE_SIZE_MAX } from "./audit/audit.service.ts";
import { INVALID_DEVICE_CODE, MALFORMED_USER_CODE } from "./cli-auth/cli-auth.service.ts";
import { INVALID_FIELDS, type ValidationMessages } from "./core/errors.ts";
import { MESSAGES as VERCEL } from "./integrations/vercel/vercel.service.ts";
import { INVITATION_NOT_FOUND } from "./invitations/invitations.service.ts";
import { IMPORT_TOO_LARGE, UNKNOWN_EXPORT_FORMAT } from "./secrets/secrets.routes.ts";
import { VERSION_NOT_FOUND } from "./secrets/secrets.service.ts";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./sign-in/passwords.ts";

const INVALID_REQUEST = "invalid request";
const NOTHING_TO_UPDATE = "Nothing to update.";
const INVALID_KEY_OR_VALUE = "invalid key or value";
const BAD_EXPECTED_VERSION = "expectedVersion must be a positive integer.";
const VERSION_NOT_FOUND_ANSWER = { status: 404, error: VERSION_NOT_FOUND };

const AUDIT_FILTERS = {
  category: "Invalid category filter.",
  action: "Invalid action filter.",
  actor: "Invalid actor filter.",
  environment: "Invalid environment filter: use development, staging or production.",
  key: "Invalid key filter: a secret key is letters, digits and _, not starting with a digit, at most 128 characters.",
  from: "Invalid date filter.",
  to: "Invalid date filter.",
  "#dateOrder": "Invalid date filter.",
};

const ROLE_MESSAGE = "Role must be admin, member, or viewer.";
const SEND_TOKEN = "Send the invitation token as { token }.";
const INVITATION_SHAPE = "Send an invitation as { email, role, environments? }.";

const SERVICE_ACCOUNTS = "/api/projects/:projectId/service-accounts";
const HOSTING = "/api/projects/:projectId/integrations/hosting";
const SECRETS = "/api/projects/:projectId/environments/:env";

/**
 * What a request that fails its route's schema answers, for every route whose schema can
 * fail: per part of the request, a message, or rules tried in order (see ValidationRules
 * in core/errors.ts). The sentences are the API's own; tests assert each one.
 */
export const VALIDATION_MESSAGES: ValidationMessages = {
  "POST /api/projects": { body: INVALID_FIELDS },
  "PATCH /api/projects/:projectId": { body: { "+": INVALID_FIELDS, "#nothingToUpdate": NOTHING_TO_UPDATE, "*": INVALID_FIELDS } },

  [`POST ${SECRETS}/secrets`]: { body: INVALID_KEY_OR_VALUE },
  [`PATCH ${SECRETS}/secrets/:secretId`]: {
    body: { "#nothingToUpdate": NOTHING_TO_UPDATE, expectedVersion: BAD_EXPECTED_VERSION, "*": INVALID_KEY_OR_VALUE },
  },
  [`GET ${SECRETS}/secrets/:secretId/versions/:versionNumber`]: { params: VERSION_NOT_FOUND_ANSWER },
  [`POST ${SECRETS}/secrets/:secretId/versions/:versionNumber/restore`]: {
    params: VERSION_NOT_FOUND_ANSWER,
    body: { expectedVersion: BAD_EXPECTED_VERSION, "*": INVALID_REQUEST },
  },
  [`GET ${SECRETS}/export`]: { querystring: UNKNOWN_EXPORT_FORMAT },
  [`POST ${SECRETS}/import`]: { body: { "#tooManyEntries": { status: 413, error: IMPORT_TOO_LARGE }, "*": INVALID_REQUEST } },

  "PATCH /api/projects/:projectId/members/:userId": { body: ROLE_MESSAGE },
  "POST /api/projects/:projectId/invitations": {
    body: {
      "": INVITATION_SHAPE,
      "+": INVITATION_SHAPE,
      email: "Enter a valid email address of up to 254 characters.",
      role: ROLE_MESSAGE,
      environments: "environments must be a list of distinct environments: development, staging, production.",
    },
  },
  "POST /api/invitations/preview": { body: SEND_TOKEN },
  "POST /api/invitations/accept": { body: SEND_TOKEN },
  "POST /api/invitations/:invitationId/accept": { params: { status: 404, error: INVITATION_NOT_FOUND } },

  [`POST ${SERVICE_ACCOUNTS}`]: { body: INVALID_FIELDS },
  [`PATCH ${SERVICE_ACCOUNTS}/:accountId`]: { body: { "+": INVALID_FIELDS, "#nothingToUpdate": NOTHING_TO_UPDATE, "*": INVALID_FIELDS } },
  [`POST ${SERVICE_ACCOUNTS}/:accountId/tokens`]: { body: INVALID_FIELDS },
  [`POST ${SERVICE_ACCOUNTS}/:accountId/trusts`]: { body: INVALID_FIELDS },

  "POST /api/cli/auth/device": { body: "Send an optional deviceName string, nothing else." },
  "POST /api/cli/auth/token": { body: INVALID_DEVICE_CODE },
  "POST /api/cli/auth/approve": {
    body: {
      "": MALFORMED_USER_CODE,
      userCode: MALFORMED_USER_CODE,
      approve: "approve must be true or false.",
      "*": "Send { userCode, approve } only.",
    },
  },
  "POST /api/cli/auth/pending": { body: MALFORMED_USER_CODE },
  "POST /api/cli/auth/refresh": { body: "Send { refreshToken } from the last login or refresh." },

  [`POST ${HOSTING}`]: { body: { "": VERCEL.enterToken, token: VERCEL.enterToken, teamId: VERCEL.teamShape, "+": VERCEL.badBody } },
  [`GET ${HOSTING}/options`]: { querystring: VERCEL.teamShape },
  [`PUT ${HOSTING}`]: {
    body: {
      "": VERCEL.chooseProject,
      "+": VERCEL.badBody,
      hostProjectId: VERCEL.chooseProject,
      teamId: VERCEL.teamShape,
      "mappings.*": VERCEL.mappingTarget,
      "#mappingTwice": VERCEL.mappingTwice,
      mappings: VERCEL.mappingsRequired,
      conflictPolicy: VERCEL.conflictPolicy,
      autoRedeploy: VERCEL.autoRedeploy,
      deployHookUrl: "The deploy hook URL must be a string or null.",
    },
  },
  [`POST ${HOSTING}/sync`]: { body: VERCEL.syncBody },

  "POST /api/auth/dev/sign-in": { body: "Enter a valid e-mail address (and optionally a name of up to 100 characters)." },
  "POST /api/auth/local/sign-in": { body: "Enter your e-mail address and password." },
  "POST /api/auth/local/link": { body: "Send the token of the link." },
  "POST /api/auth/local/set-password": {
    body: `Choose a password of ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters (and a valid e-mail address and a name of up to 100 characters, when asked).`,
  },

  "GET /api/projects/:projectId/audit": {
    querystring: { limit: `limit must be a whole number from 1 to ${PAGE_SIZE_MAX}.`, ...AUDIT_FILTERS, cursor: "Invalid cursor." },
  },
  "GET /api/projects/:projectId/audit/export": { querystring: { format: "Invalid format: use csv or json.", ...AUDIT_FILTERS } },
};
