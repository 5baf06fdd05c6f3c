import type { ValidationMessages } from "./core/errors.ts";

const INVALID_FIELDS = "invalid fields";
const NOTHING_TO_UPDATE = "Nothing to update.";

/**
 * What a request that fails its route's schema answers, for every route whose schema can
 * fail: per part of the request, rules tried in order (see ValidationRules in
 * core/errors.ts). The sentences are the API's own; tests assert each one.
 */
export const VALIDATION_MESSAGES: ValidationMessages = {
  "POST /api/projects": { body: INVALID_FIELDS },
  "PATCH /api/projects/:projectId": { body: { "#nothingToUpdate": NOTHING_TO_UPDATE, "*": INVALID_FIELDS } },
};
