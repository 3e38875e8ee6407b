// An in-memory stand-in for the Rust commands, installed through mockIPC. It keeps chats,
// models and settings the way the real services would, records every call, and lets a
// test drive the reply stream event by event.
import type { Channel } from '@tauri-apps/api/core';
import { mockIPC } from '@tauri-apps/api/mocks';
import { act } from '@testing-library/react';
import type {
  Chat,
  ChatSummary,
  LoadedModel,
  LoadProgress,
  Message,
  ModelEntry,
  Sampling,
  Settings,
  StreamEvent,
} from '../src/types';

export interface Call {
  cmd: string;
  args: Record<string, unknown>;
}

export const SAMPLING: Sampling = {
  temperature: 1,
  top_k: 64,
  top_p: 0.95,
  min_p: 0,
  repeat_penalty: 1,
  seed: null,
  max_tokens: null,
};

export function model(name: string, extra: Partial<ModelEntry> = {}): ModelEntry {
  return {
    name,
    source: 'ollama',
    path: `/store/blobs/${name}`,
    family: 'gemma3',
    architecture: 'gemma3',
    parameters: 268_098_176,
    parameter_size: '268M',
    quantization: 'Q4_K_M',
    size: 253_000_000,
    context_length: 32768,
    capabilities: ['text'],
    modified: 1_700_000_000,
    status: 'ok',
    ...extra,
  };
}

export function message(id: number, parent: number | null, role: Message['role'], content: string, extra: Partial<Message> = {}): Message {
  return {
    id,
    parent_id: parent,
    role,
    content,
    thinking: null,
    status: 'complete',
    model: role === 'assistant' ? 'gemma3:270m' : null,
    prompt_tokens: null,
    reply_tokens: null,
    tok_s: null,
    created: id,
    ...extra,
  };
}

export function chat(id: string, title: string, messages: Message[] = [], extra: Partial<Chat> = {}): Chat {
  return { id, title, pinned: false, model: 'gemma3:270m', system_prompt: '', sampling: SAMPLING, messages, ...extra };
}

interface Init {
  models?: ModelEntry[];
  current?: LoadedModel | null;
  chats?: Chat[];
  settings?: Partial<Settings>;
  adapters?: string[];
  /** How stream events are delivered; tests wrap them in act(), a browser preview does not. */
  deliver?: (send: () => void) => Promise<void>;
  /** Per-command overrides; return undefined to fall through to the default. */
  override?: Record<string, (args: Record<string, unknown>) => unknown>;
}

export function loaded(name = 'gemma3:270m', capabilities: string[] = ['text']): LoadedModel {
  return { name, architecture: 'gemma3', context_length: 8192, capabilities, parameters: 268_098_176 };
}

export function installFakeBackend(init: Init = {}) {
  const calls: Call[] = [];
  const deliver = init.deliver ?? ((send: () => void) => act(async () => send()));
  const models = init.models ?? [model('gemma3:270m')];
  let current: LoadedModel | null = init.current === undefined ? loaded() : init.current;
  const chats = new Map<string, Chat>((init.chats ?? []).map((c) => [String(c.id), structuredClone(c)]));
  const pinned = new Map<string, number>();
  let settings: Settings = {
    version: 1,
    default_model: null,
    context_length: null,
    gpu_adapter: null,
    prefill_precision: 'f32',
    theme: 'system',
    font_size: 15,
    ...init.settings,
  };
  let nextId = 1000;
  let nextChat = 1;
  let clock = 2000;
  let stream: { channel: Channel<StreamEvent>; chatId: string; assistantId: number } | null = null;

  const summary = (c: Chat): ChatSummary => ({
    id: c.id,
    title: c.title,
    pinned: c.pinned,
    model: c.model,
    updated: pinned.get(String(c.id)) ?? Math.max(0, ...c.messages.map((m) => m.created)),
    last_message: c.messages.length ? c.messages[c.messages.length - 1].content : null,
  });

  const getChat = (id: unknown): Chat => {
    const c = chats.get(String(id));
    if (!c) throw `chat ${String(id)} not found`;
    return c;
  };

  /** Adds the messages of a new turn and sends 'started', as the Rust side does. */
  function startTurn(args: Record<string, unknown>, user: Message | null, userId: number) {
    const c = getChat(args.chatId);
    if (user) c.messages.push(user);
    const assistant = message(nextId++, userId, 'assistant', '', { status: 'streaming', created: clock++, thinking: '' });
    c.messages.push(assistant);
    if (!c.title && user) c.title = user.content.slice(0, 40);
    stream = { channel: args.onEvent as Channel<StreamEvent>, chatId: String(c.id), assistantId: assistant.id as number };
    stream.channel.onmessage({ type: 'started', user_message_id: userId, assistant_message_id: assistant.id });
    return assistant.id as number;
  }

  const handlers: Record<string, (args: Record<string, unknown>) => unknown> = {
    list_models: () => structuredClone(models),
    current_model: () => current,
    load_model: async (args) => {
      const entry = models.find((m) => m.name === args.name);
      if (!entry) throw `model not found: ${String(args.name)}`;
      const ch = args.onProgress as Channel<LoadProgress>;
      ch.onmessage({ stage: 'Reading weights', fraction: 0.5 });
      current = loaded(entry.name, entry.capabilities);
      return current;
    },
    unload_model: () => {
      current = null;
    },
    import_model: (args) => {
      const m = model(String(args.path).split('/').pop()!.replace(/\.gguf$/, ''), { source: 'imported', path: String(args.path) });
      models.push(m);
      return m;
    },
    forget_model: (args) => {
      const i = models.findIndex((m) => m.name === args.name);
      if (i >= 0) models.splice(i, 1);
    },
    pick_gguf_file: () => null,
    save_text_file: (args) => `/home/me/${args.suggestedName}`,
    list_chats: () => [...chats.values()].map(summary),
    create_chat: (args) => {
      const c = chat(`new${nextChat++}`, '', [], { model: (args.model as string | null) ?? null });
      chats.set(String(c.id), c);
      return summary(c);
    },
    get_chat: (args) => structuredClone(getChat(args.id)),
    rename_chat: (args) => {
      getChat(args.id).title = String(args.title);
    },
    delete_chat: (args) => {
      chats.delete(String(args.id));
    },
    pin_chat: (args) => {
      getChat(args.id).pinned = Boolean(args.pinned);
    },
    search_chats: (args) => {
      const q = String(args.query).toLowerCase();
      return [...chats.values()].flatMap((c) =>
        c.messages
          .filter((m) => m.content.toLowerCase().includes(q))
          .map((m) => ({ chat_id: c.id, message_id: m.id, title: c.title, snippet: m.content })),
      );
    },
    update_chat_settings: (args) => {
      const c = getChat(args.id);
      c.system_prompt = String(args.systemPrompt);
      c.sampling = args.sampling as Sampling;
    },
    send_message: (args) => {
      const userId = nextId++;
      const user = message(userId, (args.parentId as number | null) ?? null, 'user', String(args.content), { created: clock++ });
      return startTurn(args, user, userId);
    },
    regenerate: (args) => {
      const c = getChat(args.chatId);
      const old = c.messages.find((m) => m.id === args.messageId)!;
      return startTurn(args, null, old.parent_id as number);
    },
    edit_message: (args) => {
      const c = getChat(args.chatId);
      const old = c.messages.find((m) => m.id === args.messageId)!;
      const userId = nextId++;
      const user = message(userId, old.parent_id as number | null, 'user', String(args.content), { created: clock++ });
      return startTurn(args, user, userId);
    },
    stop_generation: () => undefined,
    export_chat: (args) => (args.format === 'json' ? JSON.stringify(getChat(args.id)) : `# ${getChat(args.id).title}`),
    export_all: (args) => (args.format === 'json' ? JSON.stringify([...chats.values()]) : '# all'),
    import_chats: (args) => (JSON.parse(String(args.json)) as unknown[]).length,
    get_settings: () => ({ ...settings }),
    set_settings: (args) => {
      settings = args.settings as Settings;
    },
    list_adapters: () => init.adapters ?? ['NVIDIA H100 (Vulkan)', 'llvmpipe (Vulkan)'],
  };

  mockIPC(async (cmd, payload) => {
    const args = (payload ?? {}) as Record<string, unknown>;
    calls.push({ cmd, args });
    const custom = init.override?.[cmd]?.(args);
    if (custom !== undefined) return custom;
    const handler = handlers[cmd];
    if (!handler) throw `unknown command ${cmd}`;
    return handler(args);
  });

  /** Deliver one stream event (keeping the stored chat in step, as the backend saves as it streams). */
  async function emit(event: StreamEvent) {
    if (!stream) throw new Error('no stream running');
    const s = stream;
    const stored = chats.get(s.chatId)?.messages.find((m) => m.id === s.assistantId);
    if (stored && event.type === 'token') {
      if (event.thinking) stored.thinking = (stored.thinking ?? '') + event.text;
      else stored.content += event.text;
    }
    if (stored && event.type === 'stats') {
      Object.assign(stored, { prompt_tokens: event.prompt_tokens, reply_tokens: event.reply_tokens, tok_s: event.tok_s });
    }
    if (stored && event.type === 'done') stored.status = event.stop_reason === 'cancelled' ? 'incomplete' : 'complete';
    if (stored && event.type === 'error') stored.status = 'error';
    await deliver(() => s.channel.onmessage(event));
  }

  /** Tokens then a normal end. */
  async function reply(...tokens: string[]) {
    for (const text of tokens) await emit({ type: 'token', text, thinking: false });
    await emit({ type: 'done', stop_reason: 'end_of_turn' });
  }

  return {
    calls,
    callsTo: (cmd: string) => calls.filter((c) => c.cmd === cmd),
    emit,
    reply,
    chats,
    get settings() {
      return settings;
    },
    get current() {
      return current;
    },
  };
}

export type FakeBackend = ReturnType<typeof installFakeBackend>;
