// A secret's versions, newest first: reveal an old value (audited) or restore it as a new version.
import { useState } from "preact/hooks";
import { ApiError, get, post, type SecretMeta, type VersionEntry, type VersionHistory, type VersionValue } from "../api.ts";
import { Confirm, Dialog, ErrorText, LoadState, RowButton, Time, useAction, useLoad, whoLabel } from "../ui.tsx";
import { REVEAL_NOTE } from "./secrets-common.tsx";

const CHANGE_LABELS: Record<VersionEntry["changeType"], string> = {
  CREATED: "Created",
  UPDATED: "Updated",
  ROLLED_BACK: "Restored",
  BASELINE: "Baseline",
};

export function HistoryDrawer(props: {
  base: string;
  secret: SecretMeta;
  canRestore: boolean;
  onClose(): void;
  onRestored(): Promise<void>;
}) {
  const path = `${props.base}/secrets/${props.secret.id}/versions`;
  const history = useLoad(() => get<VersionHistory>(path), [path]);
  const [values, setValues] = useState<Record<number, string>>({});
  const [restoring, setRestoring] = useState<VersionEntry | undefined>(undefined);
  const reveal = useAction();
  return (
    <Dialog title={`History of ${props.secret.key}`} onClose={props.onClose} drawer>
      <p class="muted small">{REVEAL_NOTE}</p>
      <ErrorText error={reveal.error} />
      <LoadState loaded={history}>
        {(h) => (
          <ol class="versions">
            {h.versions.map((v) => (
              <li key={v.versionNumber} class={v.isCurrent ? "current" : undefined}>
                <div class="version-head">
                  <strong>v{v.versionNumber}</strong>
                  <span class={`badge change-${v.changeType.toLowerCase()}`}>{CHANGE_LABELS[v.changeType] ?? v.changeType}</span>
                  {v.isCurrent && <span class="badge">current</span>}
                </div>
                <p class="small">
                  {v.changeType === "ROLLED_BACK" && v.restoredFromVersion !== undefined && <>From v{v.restoredFromVersion}, </>}
                  by {v.changedByServiceAccount ? `service account ${v.changedByServiceAccount.name}` : whoLabel(v.changedBy)},{" "}
                  <Time iso={v.createdAt} />
                  {v.key !== props.secret.key && (
                    <>
                      {" "}
                      as <code>{v.key}</code>
                    </>
                  )}
                </p>
                {values[v.versionNumber] !== undefined && (
                  <code class="value block" tabIndex={0}>
                    {values[v.versionNumber]}
                  </code>
                )}
                <div class="row-actions">
                  {values[v.versionNumber] === undefined ? (
                    <RowButton
                      title={REVEAL_NOTE}
                      label={`Reveal version ${v.versionNumber}`}
                      onClick={() =>
                        void reveal.run(async () => {
                          const { version } = await get<{ version: VersionValue }>(`${path}/${v.versionNumber}`);
                          setValues((all) => ({ ...all, [v.versionNumber]: version.value }));
                        })
                      }
                    >
                      Reveal
                    </RowButton>
                  ) : (
                    <RowButton
                      label={`Hide version ${v.versionNumber}`}
                      onClick={() => {
                        reveal.clear();
                        setValues((all) => {
                          const { [v.versionNumber]: _gone, ...rest } = all;
                          return rest;
                        });
                      }}
                    >
                      Hide
                    </RowButton>
                  )}
                  {props.canRestore && !v.isCurrent && (
                    <RowButton
                      label={`Restore version ${v.versionNumber}`}
                      onClick={() => {
                        reveal.clear();
                        setRestoring(v);
                      }}
                    >
                      Restore
                    </RowButton>
                  )}
                </div>
              </li>
            ))}
          </ol>
        )}
      </LoadState>
      {restoring && history.data && (
        <Confirm
          title={`Restore version ${restoring.versionNumber}?`}
          confirmLabel="Restore"
          onClose={() => setRestoring(undefined)}
          onConfirm={async () => {
            try {
              await post(`${path}/${restoring.versionNumber}/restore`, { expectedVersion: history.data!.currentVersion });
            } catch (e) {
              // Someone saved meanwhile: the list shows their version now, and Restore again
              // sends it as the expected one (the sentence of the 409 stays in the dialog).
              if (e instanceof ApiError && e.status === 409) await history.reload();
              throw e;
            }
            await history.reload();
            await props.onRestored();
          }}
        >
          <p>
            The value of version {restoring.versionNumber} becomes the current value as a new version (v{history.data.currentVersion + 1}).
            Nothing is deleted.
          </p>
        </Confirm>
      )}
    </Dialog>
  );
}
