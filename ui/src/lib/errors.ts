// Turn what a command rejected with into a sentence a person can act on. Rust errors arrive
// as their Display strings (or as objects with a message); the engine's error prefixes
// (src/error.rs) tell which kind it was.
import { capitalize } from './problems';

function rawMessage(e: unknown): string {
  if (typeof e === 'string') return e;
  if (e instanceof Error) return e.message;
  if (e && typeof e === 'object') {
    const o = e as Record<string, unknown>;
    if (typeof o.message === 'string') return o.message;
    if (typeof o.error === 'string') return o.error;
    if (typeof o.kind === 'string') return o.kind.replace(/_/g, ' ');
  }
  return 'Something went wrong.';
}

const RULES: ReadonlyArray<[RegExp, (detail: string) => string]> = [
  [/out of (?:gpu |device )?memory|does not fit|not enough memory|\boom\b/i,
    (d) => `Not enough memory for this model. Try a smaller model or a shorter context length. (${d})`],
  [/^unsupported model: (.*)$/is, (d) => `This model isn't supported: ${d}`],
  [/^unsupported tensor type (.*)$/is, (d) => `This model uses a number format that isn't supported yet (${d}).`],
  [/^not a valid GGUF file: (.*)$/is, (d) => `The model file is damaged or not a GGUF file: ${d}`],
  [/^model file is missing data: (.*)$/is, (d) => `The model file is incomplete: ${d} is missing.`],
  [/^model not found: (.*)$/is, (d) => `No model named "${d}" was found. It may have been removed.`],
  [/^cannot read (.*)$/is, (d) => `Couldn't read ${d}`],
  [/^Ollama store: (.*)$/is, (d) => `Problem with the Ollama model store: ${d}`],
  [/^invalid input: (.*)$/is, (d) => capitalize(d)],
  [/context (?:is )?full|context length exceeded|too long/i, () =>
    'The conversation no longer fits in the model\'s context. Start a new chat or raise the context length in Settings.'],
  [/^cancelled$/i, () => 'Stopped.'],
  [/no model (?:is )?loaded/i, () => 'Load a model first: pick one from the model menu.'],
];

export function humanError(e: unknown): string {
  const message = rawMessage(e).trim();
  for (const [pattern, render] of RULES) {
    const m = pattern.exec(message);
    if (m) return render((m[1] ?? message).trim());
  }
  return capitalize(message);
}
