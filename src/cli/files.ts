import crypto from "node:crypto";
import fs from "node:fs";

/**
 * Writes `data` to `file` in one step: a new temporary file next to it (a random name,
 * created exclusively, so nobody can have prepared it or planted a symlink there) with
 * `mode` from the start, then renamed over `file`. A rename replaces a symlink at `file`
 * rather than writing through it, and a reader never sees half a file.
 */
export function writeFileAtomically(file: string, data: string | Buffer, mode: number): void {
  const temporary = `${file}.${crypto.randomBytes(6).toString("hex")}.tmp`;
  const fd = fs.openSync(temporary, "wx", mode);
  try {
    try {
      // Not left to the umask: the mode asked for is the mode the file has.
      fs.fchmodSync(fd, mode);
      fs.writeFileSync(fd, data);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw error;
  }
}
