// Imported first by the entry. Node's own answer to SIGUSR1 is to open its inspector on
// 127.0.0.1:9229, where any local user could read the server's master key, or a running
// `run`'s token and secrets. A listener of our own replaces that answer: the server ignores
// the signal, and `run` adds its own listener to pass it on to its command. (Node's
// --disable-sigusr1 would leave the signal blocked, and `run` could not pass it on.)
process.on("SIGUSR1", () => {});
