// The tenant's audit log (admins), with the hash chain checked in the browser: every row's hash is
// recomputed (SHA-256 of the previous hash and the entry's RFC 8785 JSON) and linked to the previous.
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type AuditEntry } from "./api";

const GENESIS = "0".repeat(64);
const HASHED = ["tenant", "seq", "id", "time", "actor", "action", "sessionID", "data"];

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function verify(entries: AuditEntry[]): Promise<string | null> {
  let prev = GENESIS;
  for (const entry of entries) {
    if (entry.prevHash !== prev) return `row ${entry.seq} does not follow the previous row`;
    const hashed = Object.fromEntries(HASHED.map((k) => [k, entry[k] ?? null]));
    if ((await sha256(String(prev) + canonical(hashed))) !== entry.rowHash) return `row ${entry.seq}: hash mismatch`;
    prev = String(entry.rowHash);
  }
  return null;
}

export function AuditView() {
  const [entries, setEntries] = useState<AuditEntry[]>([]);
  const [status, setStatus] = useState("Checking…");
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    (async () => {
      const all: AuditEntry[] = [];
      let after = 0;
      for (;;) {
        const page = await api.audit(after);
        all.push(...page.entries);
        if (page.next === null || page.next === undefined) break;
        after = page.next;
      }
      setEntries(all);
      const broken = await verify(all);
      setStatus(broken ? `Chain broken: ${broken}` : `Chain intact (${all.length} entries)`);
    })().catch((e) => setError(e instanceof ApiError && e.status === 403 ? "Only admins can read the audit log." : String(e)));
  }, []);

  if (error) return <p role="alert">{error}</p>;
  return (
    <div class="audit">
      <h2>Audit log</h2>
      <p role="status" class={status.startsWith("Chain intact") ? "ok" : "error"}>
        {status}
      </p>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th>#</th>
              <th>Time</th>
              <th>Actor</th>
              <th>Action</th>
              <th>Session</th>
            </tr>
          </thead>
          <tbody>
            {entries
              .slice(-500)
              .reverse()
              .map((e) => (
                <tr key={e.seq}>
                  <td>{e.seq}</td>
                  <td>{typeof e.time === "number" ? new Date(e.time).toLocaleString() : String(e.time ?? "")}</td>
                  <td>{String(e.actor ?? "")}</td>
                  <td>{String(e.action ?? "")}</td>
                  <td>{String(e.sessionID ?? "")}</td>
                </tr>
              ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
