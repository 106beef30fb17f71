import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { EventFrame, QuestionFrame } from '../src/frames.js';
import { buildTranscript } from '../src/state/transcript.js';

const dir = new URL('./vectors/', import.meta.url);
const names = readdirSync(dir).filter((n) => n.endsWith('.json')).sort();

describe('the transcript equals the bridge\'s on every capture', () => {
  it('has vectors', () => expect(names.length).toBeGreaterThan(20));
  for (const name of names) {
    it(name, () => {
      const v = JSON.parse(readFileSync(new URL(name, dir), 'utf8')) as { frames: EventFrame[]; questions: QuestionFrame[]; transcript: unknown };
      expect(buildTranscript(v.frames, v.questions)).toStrictEqual(v.transcript);
    });
  }
});
