#!/usr/bin/env python3
"""Draw the app icon (a llama's head over a cut gem, on a rounded tile) into icons/.

Drawn once at 1024 px and downsampled, so every size is anti-aliased.
Run: /work/venv/py/bin/python scripts/icons.py   (needs Pillow)
"""
from pathlib import Path

from PIL import Image, ImageDraw

S = 1024
OUT = Path(__file__).resolve().parent.parent / "icons"


def lerp(a, b, t):
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b))


def tile():
    """Rounded square with a diagonal violet-to-teal gradient."""
    grad = Image.new("RGBA", (S, S))
    top, bottom = (108, 76, 220, 255), (22, 160, 170, 255)
    px = grad.load()
    for y in range(S):
        for x in range(S):
            px[x, y] = lerp(top, bottom, (x + y) / (2 * S - 2))
    mask = Image.new("L", (S, S), 0)
    ImageDraw.Draw(mask).rounded_rectangle((40, 40, S - 40, S - 40), radius=210, fill=255)
    out = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    out.paste(grad, (0, 0), mask)
    return out


def gem(d):
    """A brilliant-cut gem seen from the side: crown facets over a pavilion point."""
    cx, top, girdle, tip, half = 512, 600, 700, 900, 250
    table = 120
    light, mid, dark = (255, 255, 255, 255), (214, 236, 246, 255), (168, 206, 228, 255)
    d.polygon([(cx - table, top), (cx + table, top), (cx + half, girdle), (cx - half, girdle)], fill=light)
    d.polygon([(cx - half, girdle), (cx + half, girdle), (cx, tip)], fill=mid)
    d.polygon([(cx - half, girdle), (cx - half // 3, girdle), (cx, tip)], fill=dark)
    d.polygon([(cx + half // 3, girdle), (cx + half, girdle), (cx, tip)], fill=dark)
    d.polygon([(cx - table, top), (cx - half // 3, girdle), (cx - half, girdle)], fill=mid)
    d.polygon([(cx + table, top), (cx + half // 3, girdle), (cx + half, girdle)], fill=mid)


def llama(d):
    """A llama's head and neck in profile, facing right, standing on the gem."""
    white = (255, 255, 255, 255)
    # Neck.
    d.polygon([(420, 610), (470, 330), (560, 330), (585, 610)], fill=white)
    # Head, snout and ears.
    d.rounded_rectangle((440, 250, 640, 360), radius=55, fill=white)
    d.rounded_rectangle((560, 285, 700, 360), radius=36, fill=white)
    d.polygon([(462, 280), (470, 150), (515, 262)], fill=white)
    d.polygon([(515, 272), (540, 160), (570, 280)], fill=white)
    # Eye.
    eye = (72, 60, 170, 255)
    d.ellipse((575, 285, 603, 313), fill=eye)


def main():
    img = tile()
    d = ImageDraw.Draw(img)
    gem(d)
    llama(d)
    OUT.mkdir(exist_ok=True)
    for name, size in [("32x32.png", 32), ("128x128.png", 128), ("128x128@2x.png", 256),
                       ("512x512.png", 512), ("icon.png", 512)]:
        img.resize((size, size), Image.LANCZOS).save(OUT / name, optimize=True)
        print(OUT / name)


if __name__ == "__main__":
    main()
