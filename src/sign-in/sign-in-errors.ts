// Shared by the server, which redirects to /sign-in?error=<code>, and the web UI, which
// shows the sentence: the one place these codes and their wording live.

/**
 * Why a sign-in failed, as the `error` query parameter of the redirect to /sign-in. Only
 * these fixed codes travel in the URL (never a token, code or provider text); the UI
 * shows the matching sentence.
 */
export const SIGN_IN_ERRORS = {
  sign_in_expired: "The sign-in took too long or was started in another browser. Try again.",
  state_mismatch: "The sign-in response did not match the sign-in this browser started. Try again.",
  access_denied: "The sign-in was cancelled at the identity provider.",
  sign_in_failed: "The identity provider did not confirm the sign-in. Try again.",
  provider_unavailable: "The identity provider could not be reached. Try again later.",
  domain_not_allowed: "Your account's e-mail domain is not allowed to sign in here.",
  email_not_verified: "Your identity provider has not verified your e-mail address, which this server requires.",
  account_disabled: "This account is disabled. Ask your administrator.",
} as const;
export type SignInErrorCode = keyof typeof SIGN_IN_ERRORS;
