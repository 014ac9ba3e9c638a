// The prompt box: Enter sends, Shift+Enter is a newline, files attach as data URLs, and a leading
// `/name` runs one of the server's commands (Tab completes the first one listed).
import { useRef, useState } from "preact/hooks";
import type { PromptBody } from "./api";
import type { Command } from "./types";

type FilePart = Extract<PromptBody["parts"][number], { type: "file" }>;

interface Props {
  busy: boolean;
  commands: Command[];
  onSend: (text: string, files: FilePart[]) => Promise<void>;
  onCommand: (name: string, args: string) => Promise<void>;
  onStop: () => void;
}

export function Composer({ busy, commands, onSend, onCommand, onStop }: Props) {
  const [text, setText] = useState("");
  const [files, setFiles] = useState<FilePart[]>([]);
  const [error, setError] = useState<string | null>(null);
  const picker = useRef<HTMLInputElement>(null);
  const box = useRef<HTMLTextAreaElement>(null);

  const slash = text.startsWith("/") && !text.includes(" ") ? text.slice(1) : null;
  const suggestions = slash === null ? [] : commands.filter((c) => c.name.startsWith(slash)).slice(0, 8);

  // The focus stays in the box, so the arguments are typed straight after the chosen command.
  const choose = (name: string) => {
    setText(`/${name} `);
    box.current?.focus();
  };

  const send = async () => {
    const value = text.trim();
    if (!value && !files.length) return;
    setError(null);
    try {
      const command = value.match(/^\/(\S+)\s*([\s\S]*)$/);
      if (command && commands.some((c) => c.name === command[1])) await onCommand(command[1], command[2]);
      else await onSend(value, files);
      setText("");
      setFiles([]);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  const attach = async (list: FileList | null) => {
    const read = Array.from(list ?? []).map(
      (file) =>
        new Promise<FilePart>((resolve, reject) => {
          const reader = new FileReader();
          reader.onload = () =>
            resolve({ type: "file", mime: file.type || "application/octet-stream", filename: file.name, url: String(reader.result) });
          reader.onerror = () => reject(reader.error);
          reader.readAsDataURL(file);
        }),
    );
    const added = await Promise.all(read);
    setFiles((all) => [...all, ...added]);
  };

  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      {suggestions.length > 0 && (
        <ul class="suggestions" aria-label="Commands">
          {suggestions.map((c) => (
            <li key={c.name}>
              <button type="button" class="link" onClick={() => choose(c.name)}>
                /{c.name} <small>{c.description}</small>
              </button>
            </li>
          ))}
        </ul>
      )}
      {files.length > 0 && (
        <ul class="attachments" aria-label="Attachments">
          {files.map((f, i) => (
            <li key={i}>
              {f.filename}{" "}
              <button type="button" class="link" aria-label={`Remove ${f.filename}`} onClick={() => setFiles(files.filter((_, j) => j !== i))}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="composer-row">
        <textarea
          ref={box}
          aria-label="Message"
          placeholder="Message (Enter sends, Shift+Enter for a new line, / for commands)"
          rows={2}
          value={text}
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Tab" && !e.shiftKey && suggestions.length > 0) {
              e.preventDefault();
              choose(suggestions[0].name);
            } else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              void send();
            }
          }}
        />
        <input ref={picker} type="file" multiple hidden onChange={(e) => void attach(e.currentTarget.files)} />
        <button type="button" onClick={() => picker.current?.click()}>
          Attach
        </button>
        {busy ? (
          <button type="button" class="danger" onClick={onStop}>
            Stop
          </button>
        ) : null}
        <button type="submit" class="primary">
          Send
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}
