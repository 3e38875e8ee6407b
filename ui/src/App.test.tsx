// The whole window against the in-memory backend: what a person does, and what reaches Rust.
import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import type { Channel } from '@tauri-apps/api/core';
import { describe, expect, it } from 'vitest';
import { chat, installFakeBackend, loaded, message, model, type FakeBackend } from '../test/fakeBackend';
import App from './App';
import type { LoadProgress } from './types';

async function start(backend: FakeBackend) {
  const user = userEvent.setup();
  render(<App />);
  await waitFor(() => expect(backend.callsTo('list_chats').length).toBeGreaterThan(0));
  await waitFor(() => expect(backend.callsTo('get_settings').length).toBeGreaterThan(0));
  return user;
}

async function sendText(user: ReturnType<typeof userEvent.setup>, text: string) {
  await user.type(screen.getByTestId('composer-input'), text);
  await user.click(screen.getByTestId('send-button'));
}

const main = () => within(screen.getByRole('main'));
const lastReply = () => screen.getAllByTestId('message-assistant').at(-1)!;

describe('chatting', () => {
  it('streams a reply into the view with live stats, then shows what was saved', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await sendText(user, 'Hello there');

    const send = backend.callsTo('send_message')[0].args;
    expect(send).toMatchObject({ chatId: 'new1', content: 'Hello there', parentId: null, thinking: false });
    expect(backend.callsTo('create_chat')[0].args).toEqual({ model: 'gemma3:270m' });
    expect(screen.getByTestId('message-user')).toHaveTextContent('Hello there');

    await backend.emit({ type: 'token', text: 'Hi! ', thinking: false });
    await backend.emit({ type: 'token', text: 'Here is **bold**.', thinking: false });
    const reply = lastReply();
    expect(reply).toHaveTextContent('Hi! Here is bold.');
    expect(reply.querySelector('strong')).toHaveTextContent('bold');
    expect(reply).toHaveAttribute('aria-live', 'polite');
    expect(reply).toHaveAttribute('aria-busy', 'true');
    expect(screen.getByTestId('stop-button')).toBeInTheDocument();

    await backend.emit({ type: 'stats', prompt_tokens: 12, reply_tokens: 5, tok_s: 42.5, context_used: 17, context_max: 8192 });
    const stats = screen.getByTestId('stats-bar');
    expect(stats).toHaveTextContent('42.5 tok/s');
    expect(stats).toHaveTextContent('prompt 12 · reply 5 tokens');
    expect(within(stats).getByRole('meter')).toHaveAttribute('value', '17');

    await backend.emit({ type: 'done', stop_reason: 'end_of_turn' });
    await waitFor(() => expect(screen.getByTestId('send-button')).toBeInTheDocument());
    expect(lastReply()).not.toHaveAttribute('aria-busy');
    expect(lastReply()).toHaveTextContent('Hi! Here is bold.');
    // The sidebar now lists the new chat.
    await waitFor(() => expect(screen.getAllByTestId('chat-list-item')).toHaveLength(1));
    expect(screen.getByTestId('regenerate-button')).toBeInTheDocument();
  });

  it('continues a chat under the last message of the path', async () => {
    const backend = installFakeBackend({
      chats: [chat('c1', 'Old chat', [message(1, null, 'user', 'q1'), message(2, 1, 'assistant', 'a1')])],
    });
    const user = await start(backend);
    await user.click(screen.getByRole('button', { name: /^Old chat/ }));
    await main().findByText('a1');
    await sendText(user, 'q2');
    expect(backend.callsTo('send_message')[0].args).toMatchObject({ chatId: 'c1', parentId: 2, content: 'q2' });
    expect(backend.callsTo('create_chat')).toHaveLength(0);
  });

  it('stops mid-stream with the Stop button and with Esc', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await sendText(user, 'Tell me a long story');
    await backend.emit({ type: 'token', text: 'Once upon', thinking: false });

    await user.click(screen.getByTestId('stop-button'));
    expect(backend.callsTo('stop_generation')).toHaveLength(1);
    expect(screen.getByTestId('stop-button')).toHaveTextContent('Stopping…');
    await backend.emit({ type: 'done', stop_reason: 'cancelled' });
    await waitFor(() => expect(lastReply()).toHaveTextContent('Stopped before the end.'));
    expect(lastReply()).toHaveTextContent('Once upon');

    await sendText(user, 'Again');
    await backend.emit({ type: 'token', text: 'Twice', thinking: false });
    await user.keyboard('{Escape}');
    expect(backend.callsTo('stop_generation')).toHaveLength(2);
  });

  it('shows a stream error as an alert and keeps what arrived', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await sendText(user, 'hi');
    await backend.emit({ type: 'token', text: 'Partial', thinking: false });
    await backend.emit({ type: 'error', message: 'GPU out of memory' });
    expect(await screen.findByRole('alert')).toHaveTextContent(/Not enough memory/);
    await waitFor(() => expect(lastReply()).toHaveTextContent('The reply failed.'));
    expect(lastReply()).toHaveTextContent('Partial');
  });

  it('regenerates into a new branch and switches between versions', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await sendText(user, 'Pick a number');
    await backend.reply('Seven');
    await user.click(await screen.findByTestId('regenerate-button'));
    const regen = backend.callsTo('regenerate')[0].args;
    expect(regen).toMatchObject({ chatId: 'new1', thinking: false });
    await backend.reply('Three');

    await waitFor(() => expect(lastReply()).toHaveTextContent('Three'));
    expect(within(lastReply()).getByText('2/2')).toBeInTheDocument();
    await user.click(within(lastReply()).getByRole('button', { name: 'Previous version' }));
    expect(lastReply()).toHaveTextContent('Seven');
    expect(within(lastReply()).getByText('1/2')).toBeInTheDocument();
    // Only one reply is on the path, so there is one regenerate button.
    expect(screen.getAllByTestId('message-assistant')).toHaveLength(1);
  });

  it('edits a user message into a new branch with its own reply', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await sendText(user, 'Capital of France?');
    await backend.reply('Paris.');
    const firstUserId = backend.callsTo('send_message').length && [...backend.chats.get('new1')!.messages][0].id;

    await user.click(screen.getByRole('button', { name: 'Edit message' }));
    const box = screen.getByRole('textbox', { name: 'Edit your message' });
    await user.clear(box);
    await user.type(box, 'Capital of Italy?{Enter}');
    expect(backend.callsTo('edit_message')[0].args).toMatchObject({ chatId: 'new1', messageId: firstUserId, content: 'Capital of Italy?' });
    await backend.reply('Rome.');

    await waitFor(() => expect(lastReply()).toHaveTextContent('Rome.'));
    const userMsg = screen.getByTestId('message-user');
    expect(userMsg).toHaveTextContent('Capital of Italy?');
    expect(within(userMsg).getByText('2/2')).toBeInTheDocument();
    await user.click(within(userMsg).getByRole('button', { name: 'Previous version' }));
    expect(screen.getByTestId('message-user')).toHaveTextContent('Capital of France?');
    expect(lastReply()).toHaveTextContent('Paris.');
  });

  it('streams thinking into a collapsible block when the Thinking toggle is on', async () => {
    const backend = installFakeBackend({
      models: [model('gemma4:e2b', { capabilities: ['text', 'thinking'] })],
      current: loaded('gemma4:e2b', ['text', 'thinking']),
    });
    const user = await start(backend);
    const toggle = screen.getByRole('button', { name: 'Thinking' });
    expect(toggle).toBeEnabled();
    await user.click(toggle);
    expect(toggle).toHaveAttribute('aria-pressed', 'true');
    await sendText(user, 'Why is the sky blue?');
    expect(backend.callsTo('send_message')[0].args.thinking).toBe(true);

    await backend.emit({ type: 'token', text: 'Rayleigh scattering…', thinking: true });
    expect(screen.getByRole('region', { name: 'Model thoughts' })).toHaveTextContent('Rayleigh scattering…');
    await backend.emit({ type: 'token', text: 'Because of scattering.', thinking: false });
    await backend.emit({ type: 'done', stop_reason: 'end_of_turn' });
    await waitFor(() => expect(screen.getByTestId('send-button')).toBeInTheDocument());
    expect(screen.queryByRole('region', { name: 'Model thoughts' })).toBeNull();
    await user.click(screen.getByRole('button', { name: /Thoughts/ }));
    expect(screen.getByRole('region', { name: 'Model thoughts' })).toHaveTextContent('Rayleigh');
  });

  it('disables the Thinking toggle for a model without thinking', async () => {
    const backend = installFakeBackend();
    await start(backend);
    await waitFor(() => expect(screen.getByTestId('model-picker')).toHaveTextContent('gemma3:270m'));
    expect(screen.getByRole('button', { name: 'Thinking' })).toBeDisabled();
  });

  it('asks for a model instead of sending when none is loaded', async () => {
    const backend = installFakeBackend({ current: null });
    const user = await start(backend);
    await sendText(user, 'hello?');
    expect(await screen.findByRole('alert')).toHaveTextContent('Choose a model first');
    expect(backend.callsTo('send_message')).toHaveLength(0);
    expect(screen.getByTestId('composer-input')).toHaveValue('hello?');
  });
});

describe('models', () => {
  it('loads a model picked from the list, with progress, and reports a failed load in words', async () => {
    const backend = installFakeBackend({
      current: null,
      models: [model('gemma3:270m'), model('gemma4:e4b', { family: 'gemma4' })],
      override: {
        load_model: (args) => (args.name === 'gemma4:e4b' ? Promise.reject('unsupported model: vision tower layout') : undefined),
      },
    });
    const user = await start(backend);
    await user.click(screen.getByTestId('model-picker'));
    await user.click(await screen.findByTestId('model-option-gemma3:270m'));
    await waitFor(() => expect(screen.getByTestId('model-picker')).toHaveTextContent('gemma3:270m'));
    expect(backend.callsTo('load_model')[0].args.name).toBe('gemma3:270m');

    await user.click(screen.getByTestId('model-picker'));
    await user.click(screen.getByTestId('model-option-gemma4:e4b'));
    expect(await screen.findByRole('alert')).toHaveTextContent("Couldn't load gemma4:e4b. This model isn't supported: vision tower layout");
  });

  // Tauri orders a Channel's messages among themselves, not against the command's reply: the
  // last progress message ("Ready", 100%) can reach the window after load_model has resolved
  // (or failed). It must not put the picker back into "Loading …".
  it.each([
    ['resolved', 'gemma3:270m'],
    ['failed', 'gemma4:e4b'],
  ])('ignores progress that arrives after the load command has %s', async (_how, name) => {
    const late: Array<() => void> = [];
    const backend = installFakeBackend({
      current: null,
      models: [model('gemma3:270m'), model('gemma4:e4b', { family: 'gemma4' })],
      override: {
        load_model: (args) => {
          const ch = args.onProgress as Channel<LoadProgress>;
          ch.onmessage({ stage: 'Uploading weights', fraction: 0.5 });
          late.push(() => ch.onmessage({ stage: 'Ready', fraction: 1 }));
          return args.name === 'gemma4:e4b' ? Promise.reject('unsupported model: vision tower layout') : Promise.resolve(loaded(String(args.name)));
        },
      },
    });
    const user = await start(backend);
    await user.click(screen.getByTestId('model-picker'));
    await user.click(await screen.findByTestId(`model-option-${name}`));
    const picker = screen.getByTestId('model-picker');
    await waitFor(() => expect(picker).not.toHaveTextContent('Loading'));
    await waitFor(() => expect(backend.callsTo('current_model').length).toBeGreaterThan(name === 'gemma4:e4b' ? 1 : 0));

    // The reply has been handled; now the progress message that lost the race arrives.
    expect(late).toHaveLength(1);
    await act(async () => late[0]());
    expect(picker).not.toHaveTextContent('Loading');
    expect(screen.queryByRole('progressbar')).toBeNull();
    expect(screen.getByTestId('composer-input')).toBeEnabled();
    if (name === 'gemma3:270m') expect(picker).toHaveTextContent('gemma3:270m');
    else expect(picker).toHaveTextContent('Choose a model');
  });

  it('imports a GGUF chosen in the file dialog', async () => {
    const backend = installFakeBackend({ override: { pick_gguf_file: () => '/home/me/tiny.gguf' } });
    const user = await start(backend);
    await user.click(screen.getByTestId('model-picker'));
    await user.click(screen.getByRole('button', { name: 'Import GGUF…' }));
    await waitFor(() => expect(backend.callsTo('import_model')[0]?.args).toEqual({ path: '/home/me/tiny.gguf' }));
    expect(await screen.findByRole('status')).toHaveTextContent('Imported tiny.');
  });
});

describe('history', () => {
  const seeded = () =>
    installFakeBackend({
      chats: [
        chat('a', 'Apples', [message(1, null, 'user', 'about apples'), message(2, 1, 'assistant', 'they are red')]),
        chat('b', 'Bananas', [message(3, null, 'user', 'about bananas'), message(4, 3, 'assistant', 'they are yellow')]),
        chat('c', 'Cherries', [
          message(5, null, 'user', 'about cherries'),
          message(6, 5, 'assistant', 'first answer about pits'),
          message(7, 5, 'assistant', 'second answer'),
        ], { pinned: true }),
      ],
    });

  it('lists pinned chats first, then the most recent', async () => {
    const backend = seeded();
    await start(backend);
    await waitFor(() => expect(screen.getAllByTestId('chat-list-item')).toHaveLength(3));
    const titles = screen.getAllByTestId('chat-list-item').map((li) => li.querySelector('.chat-title')!.textContent);
    expect(titles).toEqual(['Cherries', 'Bananas', 'Apples']);
  });

  it('focuses search with Ctrl+K; a hit opens the chat on the matching branch, highlighted', async () => {
    const backend = seeded();
    const user = await start(backend);
    await user.keyboard('{Control>}k{/Control}');
    const search = screen.getByTestId('search-input');
    expect(search).toHaveFocus();
    await user.type(search, 'pits');
    const hits = await screen.findAllByTestId('search-result');
    expect(hits).toHaveLength(1);
    expect(hits[0]).toHaveTextContent('Cherries');
    expect(hits[0].querySelector('mark')).toHaveTextContent('pits');
    await user.click(within(hits[0]).getByRole('button'));
    // The newest branch would be "second answer"; the hit is in the first one.
    const reply = await screen.findByText('first answer about pits');
    const article = reply.closest('article')!;
    expect(article).toHaveClass('highlighted');
    expect(within(article).getByText('1/2')).toBeInTheDocument();
    expect(backend.callsTo('search_chats').at(-1)!.args).toEqual({ query: 'pits' });
  });

  it('starts a new chat with Ctrl+N and focuses the composer', async () => {
    const backend = seeded();
    const user = await start(backend);
    await user.click(await screen.findByRole('button', { name: /^Apples/ }));
    await main().findByText('they are red');
    await user.keyboard('{Control>}n{/Control}');
    await waitFor(() => expect(main().queryByText('they are red')).toBeNull());
    await waitFor(() => expect(screen.getByTestId('composer-input')).toHaveFocus());
  });

  it('renames, pins and deletes through the sidebar', async () => {
    const backend = seeded();
    const user = await start(backend);
    await user.click(await screen.findByRole('button', { name: 'Rename Apples' }));
    const input = screen.getByRole('textbox', { name: 'Chat title' });
    await user.clear(input);
    await user.type(input, 'Green apples{Enter}');
    await screen.findByRole('button', { name: 'Pin Green apples' });
    expect(backend.callsTo('rename_chat')[0].args).toEqual({ id: 'a', title: 'Green apples' });

    await user.click(screen.getByRole('button', { name: 'Pin Green apples' }));
    expect(backend.callsTo('pin_chat')[0].args).toEqual({ id: 'a', pinned: true });
    await user.click(screen.getByRole('button', { name: 'Delete Bananas' }));
    await user.click(screen.getByRole('button', { name: 'Confirm delete Bananas' }));
    await waitFor(() => expect(screen.getAllByTestId('chat-list-item')).toHaveLength(2));
    expect(backend.callsTo('delete_chat')[0].args).toEqual({ id: 'b' });
  });

  it('exports the open chat as Markdown through a download link', async () => {
    const backend = seeded();
    const user = await start(backend);
    await user.click(await screen.findByRole('button', { name: /^Apples/ }));
    await main().findByText('they are red');
    await user.click(screen.getByRole('button', { name: 'Export chat as Markdown' }));
    await waitFor(() => expect(backend.callsTo('save_text_file')).toHaveLength(1));
    expect(backend.callsTo('export_chat')[0].args).toEqual({ id: 'a', format: 'markdown' });
    // The exported text goes to the app's native save dialog under the chat's title.
    expect(backend.callsTo('save_text_file')[0].args).toEqual({ suggestedName: 'Apples.md', content: '# Apples' });
    expect(await screen.findByText(/Saved to \/home\/me\/Apples\.md/)).toBeTruthy();
  });

  it('saves per-chat system prompt and sampling from a preset', async () => {
    const backend = seeded();
    const user = await start(backend);
    await user.click(await screen.findByRole('button', { name: /^Apples/ }));
    await main().findByText('they are red');
    await user.click(screen.getByRole('button', { name: 'Chat settings' }));
    const panel = screen.getByRole('region', { name: 'Chat settings' });
    expect(within(panel).getByRole('button', { name: 'Balanced' })).toHaveAttribute('aria-pressed', 'true');
    await user.type(within(panel).getByRole('textbox', { name: 'System prompt' }), 'Answer in French.');
    await user.click(within(panel).getByRole('button', { name: 'Precise' }));
    expect(within(panel).getByRole('spinbutton', { name: 'Temperature' })).toHaveValue(0.2);
    await user.click(within(panel).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(backend.callsTo('update_chat_settings')).toHaveLength(1));
    expect(backend.callsTo('update_chat_settings')[0].args).toMatchObject({
      id: 'a',
      systemPrompt: 'Answer in French.',
      sampling: { temperature: 0.2, top_k: 20, top_p: 0.8, min_p: 0.05, repeat_penalty: 1.05, seed: null, max_tokens: null },
    });
  });

  it('stops the stream when another chat is opened mid-reply', async () => {
    const backend = seeded();
    const user = await start(backend);
    await sendText(user, 'new question');
    await backend.emit({ type: 'token', text: 'partial', thinking: false });
    await user.click(screen.getByRole('button', { name: /^Apples/ }));
    await main().findByText('they are red');
    expect(backend.callsTo('stop_generation')).toHaveLength(1);
    // Late tokens of the abandoned stream do not leak into the open chat.
    await backend.emit({ type: 'token', text: ' LEAK', thinking: false });
    expect(screen.queryByText(/LEAK/)).toBeNull();
  });
});

describe('settings', () => {
  it('switches the theme live and saves theme, font size, adapter, prompt processing and default model', async () => {
    const backend = installFakeBackend({ models: [model('gemma3:270m'), model('bad', { status: { broken: { kind: 'missing_model_layer' } } })] });
    const user = await start(backend);
    expect(document.documentElement.dataset.theme).toBe('system');
    await user.click(screen.getByRole('button', { name: /Settings/ }));
    await screen.findByRole('heading', { name: 'Settings' });

    await user.click(screen.getByRole('radio', { name: 'Dark' }));
    expect(document.documentElement.dataset.theme).toBe('dark');
    const defaultModel = screen.getByRole('combobox', { name: 'Default model' });
    expect(within(defaultModel).queryByRole('option', { name: 'bad' })).toBeNull();
    await user.selectOptions(defaultModel, 'gemma3:270m');
    await waitFor(() => expect(screen.getByRole('option', { name: 'NVIDIA H100 (Vulkan)' })).toBeInTheDocument());
    await user.selectOptions(screen.getByRole('combobox', { name: 'GPU' }), 'NVIDIA H100 (Vulkan)');
    await user.selectOptions(screen.getByRole('combobox', { name: /^Context length/ }), '8192');
    const prompts = screen.getByRole('combobox', { name: /^Prompt processing/ });
    expect(prompts).toHaveValue('f32');
    await user.selectOptions(prompts, 'Faster (f16)');
    await user.click(screen.getByRole('button', { name: 'Save settings' }));

    await waitFor(() => expect(backend.callsTo('set_settings')).toHaveLength(1));
    expect(backend.settings).toMatchObject({
      theme: 'dark',
      default_model: 'gemma3:270m',
      gpu_adapter: 'NVIDIA H100 (Vulkan)',
      context_length: 8192,
      prefill_precision: 'f16',
      font_size: 15,
    });
  });

  it('restores the saved theme when leaving without saving', async () => {
    const backend = installFakeBackend({ settings: { theme: 'light' } });
    const user = await start(backend);
    await waitFor(() => expect(document.documentElement.dataset.theme).toBe('light'));
    await user.click(screen.getByRole('button', { name: /Settings/ }));
    await user.click(await screen.findByRole('radio', { name: 'Dark' }));
    expect(document.documentElement.dataset.theme).toBe('dark');
    await user.click(screen.getByRole('button', { name: 'Close settings' }));
    expect(document.documentElement.dataset.theme).toBe('light');
    expect(backend.callsTo('set_settings')).toHaveLength(0);
  });

  it('imports chats from a JSON file', async () => {
    const backend = installFakeBackend();
    const user = await start(backend);
    await user.click(screen.getByRole('button', { name: /Settings/ }));
    const file = new File([JSON.stringify([{ id: 1 }, { id: 2 }])], 'chats.json', { type: 'application/json' });
    await user.upload(await screen.findByLabelText('Chats JSON file'), file);
    expect(await screen.findByRole('status')).toHaveTextContent('Imported 2 chats.');
    expect(backend.callsTo('import_chats')[0].args).toEqual({ json: '[{"id":1},{"id":2}]' });
    await act(async () => {});
  });
});
