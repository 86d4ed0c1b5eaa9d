/**
 * Module <code>base</code>, package <code>dev.kpemu.natives</code>.
 *
 * <p>finds the native engines in the project cache (<code>scripts/fetch-natives.sh</code> fetches them on first use), or, without a checkout, unpacks the ones its jar carries for the host arch (<code>BundledFiles</code>: once, into <code>&lt;cache&gt;/natives/bundled-HASH</code>, each checked against the SHA-256 the build recorded); <code>cacheDirectory()</code>: <code>-Dkpemu.cache</code>/<code>KPEMU_CACHE</code>, a checkout's <code>.cache</code>, else <code>$XDG_CACHE_HOME/kpemu</code> or <code>~/.cache/kpemu</code>; the repository is <code>-Dkpemu.root</code>, else the working directory's nearest ancestor holding the scripts, else the one the jar was built in (<code>installation.properties</code>, written by the build), so a library user needs no property
 */
package dev.kpemu.natives;
