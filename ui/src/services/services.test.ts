import { Channel } from '@tauri-apps/api/core';
import { mockIPC } from '@tauri-apps/api/mocks';
import { describe, expect, it, vi } from 'vitest';
import * as chat from './chat';
import * as models from './models';
import * as settings from './settings';
import type { Sampling, Settings, StreamEvent } from '../types';

/** Records each invoke and answers with `reply(cmd, args)`. */
function record(reply: (cmd: string, args: Record<string, unknown>) => unknown = () => null) {
  const calls: Array<[string, Record<string, unknown>]> = [];
  mockIPC((cmd, args) => {
    const a = (args ?? {}) as Record<string, unknown>;
    calls.push([cmd, a]);
    return reply(cmd, a);
  });
  return calls;
}

const sampling: Sampling = { temperature: 0.7, top_k: 40, top_p: 0.9, min_p: 0.05, repeat_penalty: 1.1, seed: 7, max_tokens: 256 };

describe('models service', () => {
  it('lists models with list_models and no arguments', async () => {
    const calls = record(() => [{ name: 'a' }]);
    await expect(models.listModels()).resolves.toEqual([{ name: 'a' }]);
    expect(calls).toEqual([['list_models', {}]]);
  });

  it('loads a model passing its name and a progress Channel, and forwards progress', async () => {
    const progress = vi.fn();
    const calls = record((_cmd, args) => {
      const ch = args.onProgress as Channel<{ stage: string; fraction: number }>;
      ch.onmessage({ stage: 'Uploading', fraction: 0.25 });
      return { name: args.name, architecture: 'gemma3', context_length: 8192, capabilities: [], parameters: 1 };
    });
    const result = await models.loadModel('gemma3:270m', progress);
    expect(calls[0][0]).toBe('load_model');
    expect(calls[0][1].name).toBe('gemma3:270m');
    expect(calls[0][1].onProgress).toBeInstanceOf(Channel);
    expect(progress).toHaveBeenCalledWith({ stage: 'Uploading', fraction: 0.25 });
    expect(result.name).toBe('gemma3:270m');
  });

  it('uses the contract names for import, forget, pick, unload and current', async () => {
    const calls = record((cmd) => (cmd === 'pick_gguf_file' ? '/x.gguf' : null));
    await models.importModel('/m/a.gguf');
    await models.forgetModel('a');
    await expect(models.pickGgufFile()).resolves.toBe('/x.gguf');
    await models.unloadModel();
    await models.currentModel();
    expect(calls).toEqual([
      ['import_model', { path: '/m/a.gguf' }],
      ['forget_model', { name: 'a' }],
      ['pick_gguf_file', {}],
      ['unload_model', {}],
      ['current_model', {}],
    ]);
  });
});

describe('chat service', () => {
  it('sends a message with camelCase arguments and streams events through a Channel', async () => {
    const events: StreamEvent[] = [];
    const calls = record((_cmd, args) => {
      const ch = args.onEvent as Channel<StreamEvent>;
      ch.onmessage({ type: 'started', user_message_id: 1, assistant_message_id: 2 });
      ch.onmessage({ type: 'token', text: 'Hi', thinking: false });
      return 2;
    });
    await expect(chat.sendMessage('c1', 'Hello', 5, true, (e) => events.push(e))).resolves.toBe(2);
    const [cmd, args] = calls[0];
    expect(cmd).toBe('send_message');
    expect(args).toMatchObject({ chatId: 'c1', content: 'Hello', parentId: 5, thinking: true });
    expect(args.onEvent).toBeInstanceOf(Channel);
    expect(events.map((e) => e.type)).toEqual(['started', 'token']);
  });

  it('sends a first message with parentId null (not omitted)', async () => {
    const calls = record(() => 1);
    await chat.sendMessage('c1', 'Hi', null, false, () => {});
    expect(calls[0][1]).toHaveProperty('parentId', null);
  });

  it('regenerates and edits with messageId', async () => {
    const calls = record(() => 3);
    await chat.regenerate('c1', 9, false, () => {});
    await chat.editMessage('c1', 8, 'new text', true, () => {});
    expect(calls[0][0]).toBe('regenerate');
    expect(calls[0][1]).toMatchObject({ chatId: 'c1', messageId: 9, thinking: false });
    expect(calls[0][1].onEvent).toBeInstanceOf(Channel);
    expect(calls[1][0]).toBe('edit_message');
    expect(calls[1][1]).toMatchObject({ chatId: 'c1', messageId: 8, content: 'new text', thinking: true });
  });

  it('maps every chat-history command to its contract name and arguments', async () => {
    const calls = record();
    await chat.listChats();
    await chat.createChat('gemma3:270m');
    await chat.createChat();
    await chat.getChat('c1');
    await chat.renameChat('c1', 'Title');
    await chat.deleteChat('c1');
    await chat.pinChat('c1', true);
    await chat.searchChats('kernel');
    await chat.updateChatSettings('c1', 'Be brief.', sampling);
    await chat.stopGeneration();
    await chat.exportChat('c1', 'markdown');
    await chat.exportAll('json');
    await chat.importChats('[]');
    expect(calls).toEqual([
      ['list_chats', {}],
      ['create_chat', { model: 'gemma3:270m' }],
      ['create_chat', { model: null }],
      ['get_chat', { id: 'c1' }],
      ['rename_chat', { id: 'c1', title: 'Title' }],
      ['delete_chat', { id: 'c1' }],
      ['pin_chat', { id: 'c1', pinned: true }],
      ['search_chats', { query: 'kernel' }],
      ['update_chat_settings', { id: 'c1', systemPrompt: 'Be brief.', sampling }],
      ['stop_generation', {}],
      ['export_chat', { id: 'c1', format: 'markdown' }],
      ['export_all', { format: 'json' }],
      ['import_chats', { json: '[]' }],
    ]);
  });

  it('passes a command rejection through to the caller', async () => {
    mockIPC(() => {
      throw 'model not found: x';
    });
    await expect(chat.getChat('c1')).rejects.toBe('model not found: x');
  });
});

describe('settings service', () => {
  it('reads and writes settings and lists adapters', async () => {
    const s: Settings = { version: 1, default_model: null, context_length: 4096, gpu_adapter: null, prefill_precision: 'f32', theme: 'dark', font_size: 16 };
    const calls = record((cmd) => (cmd === 'get_settings' ? s : cmd === 'list_adapters' ? ['A'] : null));
    await expect(settings.getSettings()).resolves.toEqual(s);
    await settings.setSettings(s);
    await expect(settings.listAdapters()).resolves.toEqual(['A']);
    expect(calls).toEqual([
      ['get_settings', {}],
      ['set_settings', { settings: s }],
      ['list_adapters', {}],
    ]);
  });
});
