import type { Settings } from '../types';
import { call } from './ipc';

export const getSettings = () => call<Settings>('get_settings');

export const setSettings = (settings: Settings) => call<void>('set_settings', { settings });

export const listAdapters = () => call<string[]>('list_adapters');
