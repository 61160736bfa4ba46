/**
 * Text matched with SQL's `LIKE … ESCAPE '\'` as written: its `%`, `_` and `\` escaped, so that an
 * address or a query containing them matches only itself.
 */
export const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`)
