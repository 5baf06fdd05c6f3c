// Where an import's text comes from: pasted, or read from a chosen file in this browser.
import type { Ref } from "preact";
import { useState } from "preact/hooks";
import { MAX_IMPORT_BYTES } from "../../../src/core/secret-rules.ts";
import { strictUtf8 } from "../../../src/core/text.ts";
import { ErrorText } from "../ui.tsx";

export function ImportSource(props: { text: string; onText(text: string): void; fileInput: Ref<HTMLInputElement> }) {
  const [fileError, setFileError] = useState<string | undefined>(undefined);
  return (
    <div class="card stack">
      <label class="field">
        <span>Paste the contents of a .env file</span>
        <textarea
          rows={8}
          class="mono"
          value={props.text}
          spellcheck={false}
          autoComplete="off"
          onInput={(e) => props.onText(e.currentTarget.value)}
        />
      </label>
      <label class="field">
        <span>Or choose a file</span>
        <input
          ref={props.fileInput}
          type="file"
          accept=".env,text/plain,*"
          onChange={async (e) => {
            setFileError(undefined);
            const file = e.currentTarget.files?.[0];
            if (!file) return;
            if (file.size > MAX_IMPORT_BYTES) {
              setFileError("That file is larger than 2 MB, the most one import takes.");
              return;
            }
            let bytes: ArrayBuffer;
            try {
              bytes = await file.arrayBuffer();
            } catch {
              // Moved, deleted or unreadable since it was chosen.
              setFileError("That file could not be read. Choose it again.");
              return;
            }
            const text = strictUtf8(bytes);
            if (text === undefined) {
              setFileError("That file is not UTF-8 text. Save it as UTF-8 and choose it again.");
              return;
            }
            props.onText(text);
          }}
        />
      </label>
      <ErrorText error={fileError} />
      <p class="muted small">The file is read in this browser; nothing is sent until you press Import.</p>
    </div>
  );
}
