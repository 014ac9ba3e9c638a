// Model and tool text to HTML that cannot run script: marked renders, highlight.js colours code,
// DOMPurify removes anything active (event handlers, javascript: URLs, SVG/MathML, forms, frames).
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import diff from "highlight.js/lib/languages/diff";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import typescript from "highlight.js/lib/languages/typescript";
import yaml from "highlight.js/lib/languages/yaml";
import { Marked } from "marked";

for (const [name, language] of Object.entries({ bash, diff, javascript, json, python, typescript, yaml })) {
  hljs.registerLanguage(name, language);
}
hljs.registerAliases(["sh", "shell", "console"], { languageName: "bash" });
hljs.registerAliases(["js"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["yml"], { languageName: "yaml" });
hljs.registerAliases(["patch"], { languageName: "diff" });

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function highlight(code: string, lang?: string): string {
  const language = lang && hljs.getLanguage(lang) ? lang : null;
  return language ? hljs.highlight(code, { language, ignoreIllegals: true }).value : escapeHtml(code);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const name = (lang ?? "").split(/\s/)[0];
      const cls = name ? ` language-${escapeHtml(name)}` : "";
      return `<pre><code class="hljs${cls}">${highlight(text, name)}</code></pre>`;
    },
  },
});

const SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") ?? "";
    if (!SAFE_URL.test(href.trim())) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  USE_PROFILES: { html: true },
  // Images and media would fetch from anywhere the text names (and the CSP blocks them anyway).
  FORBID_TAGS: ["img", "svg", "math", "style", "form", "input", "button", "iframe", "video", "audio", "source"],
  FORBID_ATTR: ["style", "srcset"],
};

export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false }) as string;
  return DOMPurify.sanitize(html, PURIFY) as unknown as string;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const CLOSING = /^ {0,3}(`{3,}|~{3,})\s*$/;

function closes(line: string, fence: string): boolean {
  const found = CLOSING.exec(line);
  return found !== null && found[1][0] === fence[0] && found[1].length >= fence.length;
}

/**
 * A streaming text cut into Markdown blocks that can no longer change: each ends at a blank line
 * outside a fenced code block that is followed by an unindented line (an indented one may continue
 * a list item or an indented code block). Only the last block still grows, so a view renders the
 * others once instead of the whole text at every frame. The finished text is rendered whole.
 */
export function splitBlocks(text: string): string[] {
  const lines = text.split("\n");
  const blocks: string[] = [];
  let start = 0; // line index where the current block starts
  let fence: string | null = null;
  let blank = false; // the previous line was blank (outside a fence)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const opened = FENCE.exec(line);
    if (fence !== null) {
      if (closes(line, fence)) fence = null;
      continue;
    }
    if (blank && line.trim() !== "" && !/^\s/.test(line) && i > start) {
      blocks.push(lines.slice(start, i).join("\n"));
      start = i;
    }
    if (opened) fence = opened[1];
    blank = line.trim() === "";
  }
  blocks.push(lines.slice(start).join("\n"));
  return blocks;
}
