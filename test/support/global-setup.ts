/** Runs once before all suites. */
export default async function setup() {}
