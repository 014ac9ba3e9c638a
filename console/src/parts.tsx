// How each kind of part looks. Model and tool text only ever reaches the DOM through
// renderMarkdown (sanitised) or as text nodes.
import { memo } from "preact/compat";
import { useMemo, useState } from "preact/hooks";
import { cost, pretty, truncate } from "./format";
import { highlight, renderMarkdown, splitBlocks } from "./markdown";
import type { Part, Tokens } from "./types";

const OUTPUT_LIMIT = 2000;

export function PartView({ part }: { part: Part }) {
  switch (part.type) {
    case "text":
      return part.synthetic ? null : <Markdown text={part.text ?? ""} streaming={streaming(part)} />;
    case "reasoning":
      return (
        <details class="reasoning">
          <summary>Reasoning</summary>
          <Markdown text={part.text ?? ""} streaming={streaming(part)} />
        </details>
      );
    case "tool":
      return <ToolView part={part} />;
    case "step-finish":
      return <StepFinish part={part} />;
    case "retry":
      return (
        <div class="retry" role="status">
          Retrying (attempt {part.attempt}): {part.error?.data?.message ?? part.error?.message ?? "provider error"}
        </div>
      );
    case "file":
      return <div class="file">Attached: {part.filename ?? part.mime}</div>;
    case "patch":
      return <div class="patch">Changed: {(part.files ?? []).join(", ")}</div>;
    case "compaction":
      return <div class="meta">Conversation compacted</div>;
    default:
      return null;
  }
}

/** A model's text or reasoning part still growing: started, not ended. */
function streaming(part: Part): boolean {
  return !!part.time && !part.time.end;
}

// While a part streams, re-rendering its whole Markdown at every frame costs more the longer it
// gets (a long reply janks): only its last block is rendered again, the others are kept. Once it
// ends, it is rendered whole, so the final view is exactly the Markdown of the whole text.
export function Markdown({ text, streaming = false }: { text: string; streaming?: boolean }) {
  const html = useMemo(() => (streaming ? "" : renderMarkdown(text)), [text, streaming]);
  const blocks = useMemo(() => (streaming ? splitBlocks(text) : []), [text, streaming]);
  if (!streaming) return <div key="whole" class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
  return (
    <div key="streaming" class="markdown">
      {blocks.map((block, index) => (
        <MarkdownBlock key={index} text={block} />
      ))}
    </div>
  );
}

const MarkdownBlock = memo(function MarkdownBlock({ text }: { text: string }) {
  return <div class="markdown-block" dangerouslySetInnerHTML={{ __html: renderMarkdown(text) }} />;
});

function StepFinish({ part }: { part: Part }) {
  const t: Tokens | undefined = part.tokens;
  if (!t) return null;
  return (
    <div class="meta step">
      {t.input} in · {t.output} out{t.reasoning ? ` · ${t.reasoning} reasoning` : ""}
      {t.cache?.read ? ` · ${t.cache.read} cached` : ""} · {cost(part.cost)}
    </div>
  );
}

function ToolView({ part }: { part: Part }) {
  const state = part.state ?? { status: "pending" };
  const diff = diffOf(part);
  return (
    <details class={`tool tool-${state.status}`} open={state.status !== "completed"}>
      <summary>
        <span class="tool-name">{part.tool}</span>
        <span class="tool-title">{state.title ?? ""}</span>
        <span class={`badge badge-${state.status}`}>{state.status}</span>
      </summary>
      <div class="tool-body">
        <h4>Input</h4>
        <pre class="code">{pretty(state.input ?? {})}</pre>
        {diff && (
          <>
            <h4>Diff</h4>
            <pre class="code diff">
              <code class="hljs" dangerouslySetInnerHTML={{ __html: highlight(diff, "diff") }} />
            </pre>
          </>
        )}
        {state.status === "completed" && <Output text={state.output ?? ""} />}
        {state.status === "error" && <pre class="code error">{state.error}</pre>}
      </div>
    </details>
  );
}

function diffOf(part: Part): string | null {
  if (!["edit", "write", "apply_patch", "multiedit"].includes(part.tool ?? "")) return null;
  const metadata = part.state?.metadata ?? {};
  const diff = metadata["diff"] ?? metadata["patch"];
  return typeof diff === "string" && diff ? diff : null;
}

function Output({ text }: { text: string }) {
  const [full, setFull] = useState(false);
  const shown = full ? { text, cut: false } : truncate(text, OUTPUT_LIMIT);
  return (
    <>
      <h4>Output</h4>
      <pre class="code">{shown.text}</pre>
      {shown.cut && (
        <button type="button" class="link" onClick={() => setFull(true)}>
          Show all {text.length} characters
        </button>
      )}
    </>
  );
}
