// Theme and font size live on <html>: a data attribute picks the CSS variable set, and the
// font size is a CSS custom property set through the CSSOM (allowed by a strict CSP, unlike
// style attributes in markup).
import type { Settings } from '../types';

export const FONT_SIZES = { min: 12, max: 22, default: 15 } as const;

export function applyAppearance(settings: Pick<Settings, 'theme' | 'font_size'>, root = document.documentElement): void {
  root.dataset.theme = settings.theme;
  const size = Math.min(FONT_SIZES.max, Math.max(FONT_SIZES.min, settings.font_size || FONT_SIZES.default));
  root.style.setProperty('--font-size', `${size}px`);
}
