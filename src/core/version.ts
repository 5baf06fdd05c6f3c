/** The server's version: the executable's help and `version`, and the OpenAPI document. */
export const VERSION = "0.1.0";
