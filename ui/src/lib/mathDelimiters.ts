// Models often write LaTeX as \( … \) and \[ … \]; remark-math only knows $ … $ and $$ … $$.
// Rewrite the former outside code so both render. Code spans and fences are left untouched.

const CODE = /(```[\s\S]*?(?:```|$)|~~~[\s\S]*?(?:~~~|$)|`[^`\n]*`)/g;

function convert(text: string): string {
  return text
    .replace(/\\\[([\s\S]+?)\\\]/g, (_m, body: string) => `\n$$\n${body.trim()}\n$$\n`)
    .replace(/\\\(([\s\S]+?)\\\)/g, (_m, body: string) => `$${body.trim()}$`);
}

export function normalizeMath(markdown: string): string {
  if (!markdown.includes('\\(') && !markdown.includes('\\[')) return markdown;
  return markdown
    .split(CODE)
    .map((part, i) => (i % 2 === 1 ? part : convert(part)))
    .join('');
}
