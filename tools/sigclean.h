/*
 * tools/sigclean.h — a folder the CLI is building that must not outlive the
 * process when the user stops it: SIGINT (Ctrl-C), SIGTERM or SIGHUP remove
 * it, then the signal's default action ends the process as it would have.
 * A signal the process ignores (nohup's SIGHUP) stays ignored. SIGKILL
 * cannot be caught: a folder named ".<name>...-XXXXXX" may then remain,
 * for the next run to sweep (workdir.h).
 *
 *   sigclean_arm();            handlers in place, held: a signal waits
 *   make the folder; sigclean_folder(dir);
 *   sigclean_release();        a waiting signal acts now
 *   ... sigclean_hold(); a step that must finish; sigclean_release(); ...
 *   remove the folder; sigclean_disarm();
 */
#ifndef EDGERT_TOOLS_SIGCLEAN_H
#define EDGERT_TOOLS_SIGCLEAN_H

/** Install the handlers, held (so a folder being made is never left). */
void sigclean_arm(void);
/** The folder (a whole tree) to remove. */
void sigclean_folder(const char *dir);
/** While held, a signal waits: it acts at sigclean_release. */
void sigclean_hold(void);
void sigclean_release(void);
/** Back to the handlers before sigclean_arm; the folder is the caller's again. */
void sigclean_disarm(void);

#endif
