import { Component, memo, type ReactNode } from 'react';
import ReactMarkdown, { type Components, type Options } from 'react-markdown';
import rehypeHighlight from 'rehype-highlight';
import rehypeKatex from 'rehype-katex';
import remarkGfm from 'remark-gfm';
import remarkMath from 'remark-math';
import { normalizeMath } from '../lib/mathDelimiters';
import { CodeBlock } from './CodeBlock';

const remarkPlugins: Options['remarkPlugins'] = [remarkGfm, remarkMath];
const rehypePlugins: Options['rehypePlugins'] = [
  [rehypeKatex, { throwOnError: false, strict: 'ignore' }],
  // Only fenced blocks that name a known language are highlighted; guessing is slow on long
  // replies, and an unknown language is left plain.
  [rehypeHighlight, { detect: false }],
];

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
      <PlainOnError text={text}>
        <Rendered text={text} />
      </PlainOnError>
    </div>
  );
});

function Rendered({ text }: { text: string }) {
  return (
    <ReactMarkdown remarkPlugins={remarkPlugins} rehypePlugins={rehypePlugins} components={components}>
      {normalizeMath(text)}
    </ReactMarkdown>
  );
}

/** A reply the renderers choke on is shown as plain text instead of taking the window down;
 * new text (the stream went on) gets another try. */
export class PlainOnError extends Component<{ text: string; children: ReactNode }, { failed: boolean; text: string }> {
  state = { failed: false, text: this.props.text };

  static getDerivedStateFromError() {
    return { failed: true };
  }

  static getDerivedStateFromProps(props: { text: string }, state: { failed: boolean; text: string }) {
    return props.text === state.text ? null : { failed: false, text: props.text };
  }

  render() {
    return this.state.failed ? <pre className="plain-fallback">{this.props.text}</pre> : this.props.children;
  }
}
