import { useRef, type ComponentPropsWithoutRef } from 'react';
import { CopyButton } from './CopyButton';

/** A fenced code block with its language and a copy button (replaces markdown's <pre>). */
export function CodeBlock({ children, className, node: _node, ...rest }: ComponentPropsWithoutRef<'pre'> & { node?: unknown }) {
  const ref = useRef<HTMLPreElement>(null);
  const language = languageOf(children);
  return (
    <div className="code-block">
      <div className="code-header">
        <span className="code-language">{language ?? 'text'}</span>
        <CopyButton label="Copy code" getText={() => ref.current?.innerText ?? ref.current?.textContent ?? ''} />
      </div>
      <pre ref={ref} className={className} {...rest}>
        {children}
      </pre>
    </div>
  );
}

/** rehype-highlight marks <code> with `language-xyz`; read it from the child's className. */
function languageOf(children: unknown): string | null {
  const child = Array.isArray(children) ? children[0] : children;
  const cls = (child as { props?: { className?: string } } | null)?.props?.className ?? '';
  const m = /language-([\w+#-]+)/.exec(cls);
  return m ? m[1] : null;
}
