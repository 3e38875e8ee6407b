import { fireEvent, render, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { loaded, model } from '../../test/fakeBackend';
import { BranchSwitcher } from './BranchSwitcher';
import { ChatListItem } from './ChatListItem';
import { Composer } from './Composer';
import { Markdown, PlainOnError } from './Markdown';
import { ModelPicker } from './ModelPicker';
import { markTerms } from './SearchResults';
import { ThinkingBlock } from './ThinkingBlock';

function renderComposer(overrides: Partial<Parameters<typeof Composer>[0]> = {}) {
  const onSend = vi.fn(async () => true);
  const onStop = vi.fn();
  render(<Composer streaming={false} stopping={false} disabled={false} placeholder="Message" onSend={onSend} onStop={onStop} {...overrides} />);
  return { onSend, onStop, input: screen.getByTestId('composer-input') as HTMLTextAreaElement };
}

describe('Composer', () => {
  it('sends on Enter and clears, Shift+Enter adds a line', async () => {
    const user = userEvent.setup();
    const { onSend, input } = renderComposer();
    await user.type(input, 'line one{Shift>}{Enter}{/Shift}line two');
    expect(input.value).toBe('line one\nline two');
    expect(onSend).not.toHaveBeenCalled();
    await user.keyboard('{Enter}');
    expect(onSend).toHaveBeenCalledWith('line one\nline two');
    expect(input.value).toBe('');
  });

  it('ignores Enter while an IME is composing', () => {
    const { onSend, input } = renderComposer();
    fireEvent.change(input, { target: { value: 'にほんご' } });
    fireEvent.keyDown(input, { key: 'Enter', isComposing: true });
    fireEvent.keyDown(input, { key: 'Enter', keyCode: 229 });
    expect(onSend).not.toHaveBeenCalled();
    fireEvent.keyDown(input, { key: 'Enter' });
    expect(onSend).toHaveBeenCalledWith('にほんご');
  });

  it('does not send blank text, and keeps the text when sending fails', async () => {
    const user = userEvent.setup();
    const onSend = vi.fn(async () => false);
    const { input } = renderComposer({ onSend });
    await user.type(input, '   {Enter}');
    expect(onSend).not.toHaveBeenCalled();
    expect(screen.getByTestId('send-button')).toBeDisabled();
    await user.clear(input);
    await user.type(input, 'hello{Enter}');
    expect(onSend).toHaveBeenCalledWith('hello');
    expect(input.value).toBe('hello');
  });

  it('shows Stop instead of Send while streaming', async () => {
    const user = userEvent.setup();
    const { onStop } = renderComposer({ streaming: true });
    expect(screen.queryByTestId('send-button')).toBeNull();
    await user.click(screen.getByTestId('stop-button'));
    expect(onStop).toHaveBeenCalledOnce();
  });
});

describe('Markdown', () => {
  it('highlights fenced code and copies it with the copy button', async () => {
    const user = userEvent.setup();
    render(<Markdown text={'Here:\n\n```rust\nfn main() { let x = 1; }\n```\n'} />);
    expect(screen.getByText('rust')).toBeInTheDocument();
    const code = document.querySelector('pre code')!;
    expect(code.className).toContain('hljs');
    expect(code.querySelector('.hljs-keyword')).not.toBeNull();
    await user.click(screen.getByRole('button', { name: 'Copy code' }));
    await expect(navigator.clipboard.readText()).resolves.toBe('fn main() { let x = 1; }\n');
    expect(screen.getByRole('button', { name: 'Copy code' })).toHaveTextContent('Copied');
  });

  it('renders LaTeX with KaTeX, inline and display, and GFM tables', () => {
    const { container } = render(<Markdown text={'Inline $a^2$ and\n\n$$\n\\frac{1}{2}\n$$\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nand \\(x\\)'} />);
    expect(container.querySelectorAll('.katex').length).toBe(3);
    expect(container.querySelector('.katex-display')).not.toBeNull();
    expect(container.querySelector('table td')).toHaveTextContent('1');
  });

  it('leaves code in an unknown language plain, and falls back to text if rendering throws', () => {
    const { container, unmount } = render(<Markdown text={'```klingon\nqapla\n```'} />);
    expect(container.querySelector('pre code')).toHaveTextContent('qapla');
    expect(container.querySelector('.hljs-keyword')).toBeNull();
    unmount();

    const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
    const Broken = (): never => {
      throw new Error('renderer bug');
    };
    const r = render(<PlainOnError text={'raw *text*'}><Broken /></PlainOnError>);
    expect(r.container.querySelector('.plain-fallback')).toHaveTextContent('raw *text*');
    // New text gets another try.
    r.rerender(<PlainOnError text={'more'}><p>fine</p></PlainOnError>);
    expect(r.container).toHaveTextContent('fine');
    spy.mockRestore();
  });

  it('opens links outside the app and does not load remote images', () => {
    const { container } = render(<Markdown text={'[site](https://example.org) ![pic](https://example.org/a.png)'} />);
    expect(screen.getByRole('link', { name: 'site' })).toHaveAttribute('target', '_blank');
    expect(container.querySelector('img')).toBeNull();
    expect(container).toHaveTextContent('[image: pic]');
  });
});

describe('ThinkingBlock', () => {
  it('is open while thinking and collapsed afterwards, and toggles on click', async () => {
    const user = userEvent.setup();
    const { rerender } = render(<ThinkingBlock text="step one" active />);
    const toggle = screen.getByRole('button', { name: /Thinking/ });
    expect(toggle).toHaveAttribute('aria-expanded', 'true');
    expect(screen.getByRole('region', { name: 'Model thoughts' })).toHaveTextContent('step one');
    rerender(<ThinkingBlock text="step one" active={false} />);
    expect(screen.getByRole('button', { name: /Thoughts/ })).toHaveAttribute('aria-expanded', 'false');
    expect(screen.queryByRole('region', { name: 'Model thoughts' })).toBeNull();
    await user.click(screen.getByRole('button', { name: /Thoughts/ }));
    expect(screen.getByRole('region', { name: 'Model thoughts' })).toHaveTextContent('step one');
  });
});

describe('BranchSwitcher', () => {
  it('shows the position and moves between versions', async () => {
    const user = userEvent.setup();
    const onSelect = vi.fn();
    const { rerender } = render(<BranchSwitcher index={0} count={2} onSelect={onSelect} />);
    expect(screen.getByText('1/2')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Previous version' })).toBeDisabled();
    await user.click(screen.getByRole('button', { name: 'Next version' }));
    expect(onSelect).toHaveBeenCalledWith(1);
    rerender(<BranchSwitcher index={0} count={1} onSelect={onSelect} />);
    expect(screen.queryByRole('group', { name: 'Versions' })).toBeNull();
  });
});

describe('ModelPicker', () => {
  const models = [
    model('gemma3:270m', { capabilities: ['text'] }),
    model('gemma4:e2b', { family: 'gemma4', parameter_size: '5.1B', quantization: 'Q8_0', size: 5_400_000_000, context_length: 131072, capabilities: ['text', 'vision', 'audio', 'thinking'] }),
    model('broken:1b', { status: { broken: { kind: 'missing_blob', digest: 'sha256:00', path: '/b' } } }),
  ];
  const handlers = () => ({ onLoad: vi.fn(), onUnload: vi.fn(), onImport: vi.fn(), onForget: vi.fn() });

  it('lists models with their facts and capabilities; a broken one is disabled with its reason', async () => {
    const user = userEvent.setup();
    const h = handlers();
    render(<ModelPicker models={models} current={null} loading={null} {...h} />);
    await user.click(screen.getByTestId('model-picker'));
    const e2b = screen.getByTestId('model-option-gemma4:e2b');
    expect(e2b).toHaveTextContent('gemma4 · 5.1B · Q8_0 · 5.4 GB · 128K context');
    for (const c of ['text', 'vision', 'audio', 'thinking']) expect(within(e2b).getByText(c)).toBeInTheDocument();
    const broken = screen.getByTestId('model-option-broken:1b');
    expect(broken).toBeDisabled();
    expect(broken).toHaveTextContent(/missing from the Ollama store/);
    await user.click(broken);
    expect(h.onLoad).not.toHaveBeenCalled();
    await user.click(e2b);
    expect(h.onLoad).toHaveBeenCalledWith('gemma4:e2b');
    expect(screen.queryByRole('dialog', { name: 'Models' })).toBeNull();
  });

  it('shows a progress bar while loading', () => {
    render(<ModelPicker models={models} current={null} loading={{ name: 'gemma3:270m', progress: { stage: 'Uploading weights', fraction: 0.4 } }} {...handlers()} />);
    const bar = screen.getByRole('progressbar', { name: 'Loading gemma3:270m' });
    expect(bar).toHaveAttribute('value', '0.4');
    expect(screen.getByText('Uploading weights 40%')).toBeInTheDocument();
    expect(screen.getByTestId('model-picker')).toHaveTextContent('Loading gemma3:270m…');
  });

  it('offers Import GGUF… and Unload, and closes on Escape', async () => {
    const user = userEvent.setup();
    const h = handlers();
    render(<ModelPicker models={models} current={loaded('gemma3:270m')} loading={null} {...h} />);
    await user.click(screen.getByTestId('model-picker'));
    await user.click(screen.getByRole('button', { name: 'Import GGUF…' }));
    expect(h.onImport).toHaveBeenCalled();
    await user.click(screen.getByTestId('model-picker'));
    await user.keyboard('{Escape}');
    expect(screen.queryByRole('dialog', { name: 'Models' })).toBeNull();
    await user.click(screen.getByTestId('model-picker'));
    await user.click(screen.getByRole('button', { name: 'Unload gemma3:270m' }));
    expect(h.onUnload).toHaveBeenCalled();
  });
});

describe('ChatListItem', () => {
  const summary = { id: 'c1', title: 'Rust help', pinned: false, model: null, updated: 1, last_message: 'hi' };

  it('renames with Enter, pins, and deletes only after confirming', async () => {
    const user = userEvent.setup();
    const props = { onOpen: vi.fn(), onRename: vi.fn(), onDelete: vi.fn(), onPin: vi.fn() };
    render(<ul><ChatListItem chat={summary} active={false} {...props} /></ul>);
    await user.click(screen.getByRole('button', { name: 'Rename Rust help' }));
    const input = screen.getByRole('textbox', { name: 'Chat title' });
    await user.clear(input);
    await user.type(input, 'Borrow checker{Enter}');
    expect(props.onRename).toHaveBeenCalledWith('Borrow checker');
    await user.click(screen.getByRole('button', { name: 'Pin Rust help' }));
    expect(props.onPin).toHaveBeenCalledWith(true);
    await user.click(screen.getByRole('button', { name: 'Delete Rust help' }));
    expect(props.onDelete).not.toHaveBeenCalled();
    await user.click(screen.getByRole('button', { name: 'Confirm delete Rust help' }));
    expect(props.onDelete).toHaveBeenCalledOnce();
  });
});

describe('search snippets', () => {
  it('marks the query words without interpreting HTML', () => {
    const { container } = render(<p>{markTerms('the <b>GPU</b> kernel and gpu', 'gpu')}</p>);
    expect([...container.querySelectorAll('mark')].map((m) => m.textContent)).toEqual(['GPU', 'gpu']);
    expect(container.querySelector('b')).toBeNull();
  });
});
