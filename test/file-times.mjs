// A second reporter for `npm test`: the time of each test file's top-level tests, summed,
// slowest first, written to test-output/file-times-<store>.txt. It shows where the run's
// minutes go (the spec reporter names tests, not files) without timing anything in a test.
export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if ((event.type === "test:pass" || event.type === "test:fail") && event.data.nesting === 0 && event.data.file) {
      const file = files.get(event.data.file) ?? { ms: 0, tests: 0 };
      file.ms += event.data.details.duration_ms;
      file.tests += 1;
      files.set(event.data.file, file);
    }
  }
  for (const [name, file] of [...files].sort((a, b) => b[1].ms - a[1].ms)) {
    yield `${(file.ms / 1000).toFixed(1).padStart(7)} s ${String(file.tests).padStart(4)} tests  ${name.split("/").pop()}\n`;
  }
}
