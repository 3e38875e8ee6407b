// Browser preview: the real UI over the tests' in-memory backend, seeded with sample data.
// `?view=settings|models|stream|dark` picks a screen for screenshots.
import { createRoot } from 'react-dom/client';
import 'katex/dist/katex.min.css';
import '../src/styles/app.css';
import '../src/styles/highlight.css';
import App from '../src/App';
import { chat, installFakeBackend, loaded, message, model } from '../test/fakeBackend';

const answer = [
  'Here is a function that adds two numbers:\n\n',
  '```rust\nfn add(a: i32, b: i32) -> i32 {\n    a + b // wrapping is the caller\'s problem\n}\n```\n\n',
  'The sum of the first $n$ integers is\n\n$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n\n',
  '| n | sum |\n|---|-----|\n| 3 | 6 |\n| 10 | 55 |\n',
];

const backend = installFakeBackend({
  deliver: async (send) => send(),
  models: [
    model('gemma3:270m'),
    model('gemma4:e4b', {
      family: 'gemma4', parameter_size: '8.0B', quantization: 'Q4_K_M', size: 9_600_000_000,
      context_length: 131072, capabilities: ['text', 'vision', 'audio', 'thinking'],
    }),
    model('gemma4:26b', {
      family: 'gemma4', parameter_size: '25.8B', quantization: 'Q4_K_M', size: 17_000_000_000,
      context_length: 262144, capabilities: ['text', 'vision', 'moe', 'thinking'],
    }),
    model('my-finetune', { source: 'imported', path: '/home/me/models/my-finetune.gguf', status: { broken: { kind: 'missing_file', path: '/home/me/models/my-finetune.gguf' } } }),
  ],
  current: loaded('gemma4:e4b', ['text', 'vision', 'audio', 'thinking']),
  chats: [
    chat('c1', 'Adding numbers in Rust', [
      message(1, null, 'user', 'Write a Rust function that adds two numbers, and remind me of the sum formula.'),
      message(2, 1, 'assistant', 'An older answer.', { created: 2 }),
      message(3, 1, 'assistant', answer.join(''), {
        created: 3, thinking: 'The user wants a tiny function and the closed form of 1+…+n.',
        prompt_tokens: 38, reply_tokens: 112, tok_s: 47.3,
      }),
    ], { pinned: true, model: 'gemma4:e4b' }),
    chat('c2', 'Trip ideas for Lisbon', [message(4, null, 'user', 'Three days in Lisbon: what should I see?'), message(5, 4, 'assistant', 'Belém, Alfama and a day trip to Sintra.')]),
    chat('c3', 'Explain KV caches', [message(6, null, 'user', 'What is a KV cache?'), message(7, 6, 'assistant', 'It stores keys and values of past tokens.')]),
  ],
  override: {
    send_message: () => {
      setTimeout(() => {
        void (async () => {
          for (const piece of ['Sure. ', 'Streaming ', 'a reply ', 'token by token', '…']) {
            await new Promise((r) => setTimeout(r, 250));
            await backend.emit({ type: 'token', text: piece, thinking: false });
            await backend.emit({ type: 'stats', prompt_tokens: 180, reply_tokens: 12, tok_s: 51.8, context_used: 192, context_max: 8192 });
          }
        })();
      }, 0);
      return undefined;
    },
  },
});

const view = new URLSearchParams(location.search).get('view');
createRoot(document.getElementById('root')!).render(<App />);

// Drive the window to the requested screen once it has rendered.
const click = (selector: string) => (document.querySelector(selector) as HTMLElement | null)?.click();
setTimeout(() => {
  if (view !== 'settings') click('.chat-open');
  if (view === 'settings') click('.sidebar-bottom button');
  if (view === 'models') setTimeout(() => click('[data-testid="model-picker"]'), 300);
  if (view === 'dark') document.documentElement.dataset.theme = 'dark';
  if (view === 'stream') setTimeout(() => typeAndSend('Tell me something.'), 300);
}, 300);

function typeAndSend(text: string) {
  const input = document.querySelector('[data-testid="composer-input"]') as HTMLTextAreaElement;
  // React tracks the value through the native setter; assigning .value alone is ignored.
  Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value')!.set!.call(input, text);
  input.dispatchEvent(new Event('input', { bubbles: true }));
  setTimeout(() => click('[data-testid="send-button"]'), 50);
}
