import { memo } from 'react';
import ReactMarkdown, { type Components } from 'react-markdown';
import rehypeHighlight from 'rehype-highlight';
import rehypeKatex from 'rehype-katex';
import remarkGfm from 'remark-gfm';
import remarkMath from 'remark-math';
import { normalizeMath } from '../lib/mathDelimiters';
import { CodeBlock } from './CodeBlock';

const remarkPlugins = [remarkGfm, remarkMath];
const rehypePlugins = [
  [rehypeKatex, { throwOnError: false, strict: 'ignore' }],
  // Only fenced blocks that name a language are highlighted; guessing is slow on long replies.
  [rehypeHighlight, { detect: false, ignoreMissing: true }],
] as const;

const components: Components = {
  pre: CodeBlock,
  // Links open outside the app window (the webview must not navigate away from the chat).
  a: ({ node: _node, children, ...props }) => (
    <a {...props} target="_blank" rel="noreferrer noopener">
      {children}
    </a>
  ),
  // Remote images would be blocked by the CSP anyway; show their text instead of a broken icon.
  img: ({ alt, src }) => <span className="md-image">[image: {alt || src}]</span>,
};

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown
        remarkPlugins={remarkPlugins}
        rehypePlugins={rehypePlugins as never}
        components={components}
      >
        {normalizeMath(text)}
      </ReactMarkdown>
    </div>
  );
});
