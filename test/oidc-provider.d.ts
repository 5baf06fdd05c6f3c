// oidc-provider ships no types; the tests use it only as a real identity provider.
declare module "oidc-provider";
