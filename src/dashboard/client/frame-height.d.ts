/** frame-height.js's type, for the server, which allows the script by its hash (serve.ts). */
export declare const FRAME_SCRIPT: string
