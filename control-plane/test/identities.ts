/**
 * Ids apps really have, each of a kind the old `[a-z0-9._-]` rule refused: every product must take
 * them as they are (`platform/identities.ts`).
 */
export const REAL_APP_IDS: Record<string, string> = {
  'a Firebase UID': 'Kx9fQ2mZ7pS1vL0aB3cD4eF5gH6i',
  'an email': 'Ana.Lopez+chat@example.com',
  'an upper-case UUID': '3F2504E0-4F89-41D3-9A0C-0305E82C3301',
  'an Auth0 id': 'auth0|5f7c8ec7c33c6c004bbafe82',
  'a Google id through Auth0': 'google-oauth2|103547991597142817347',
  'a Clerk id': 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC',
  'a name in kanji': '山田太郎',
  'an inner space and a dot': 'Team Room.1',
  '128 bytes in 32 characters': '😀'.repeat(32),
};

/** What no product takes as an id: controls, bidi and other invisible characters, over 128 bytes. */
export const REFUSED_APP_IDS: Record<string, string> = {
  empty: '',
  'only spaces': '   ',
  'a leading space': ' ana',
  'a trailing space': 'ana ',
  NUL: 'a\u0000b',
  'a tab': 'a\tb',
  'a line feed': 'ana\n',
  'a C1 control': 'a\u0085b',
  'a right-to-left override': 'ana\u202Etxt',
  'a left-to-right embedding': '\u202Aana',
  'a first-strong isolate': 'an\u2068a',
  'a pop directional isolate': 'ana\u2069',
  'a right-to-left mark': '\u200Fana',
  'an Arabic letter mark': 'a\u061Cb',
  'a zero-width space': 'a\u200Bna',
  'a no-break space': 'a\u00A0b',
  'a line separator': 'a\u2028b',
  'a lone surrogate': 'a\uD800b',
  '129 ASCII bytes': 'a'.repeat(129),
  '129 bytes in 33 characters': `${'😀'.repeat(32)}a`,
};

/** Names people read, in any script: nicknames and file names take them as they are. */
export const READABLE_NAMES = ['Ana López', '山田 太郎', 'محمد', '👩‍💻 Ana', 'O’Brien & Co. <3'];

/** What no name takes: controls, bidi controls, line separators, a space at either end. */
export const REFUSED_NAMES: Record<string, string> = {
  'a leading space': ' Ana',
  'a trailing line feed': 'Ana\n',
  'a bell': 'A\u0007na',
  'a C1 control': 'Ana\u0085',
  'a right-to-left override (invoice\u202Etxt.exe shows as invoiceexe.txt)': 'invoice\u202Etxt.exe',
  'a right-to-left isolate': '\u2067Ana',
  'a left-to-right mark': 'Ana\u200E',
  'a paragraph separator': 'A\u2029na',
  'a lone surrogate': 'Ana\uDC00',
};
