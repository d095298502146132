/*
 * tools/sigclean.h — a folder the CLI is building that must not outlive the
 * process when the user stops it: SIGINT (Ctrl-C), SIGTERM or SIGHUP remove
 * it, then the signal's default action ends the process as it would have.
 * A signal the process ignores (nohup's SIGHUP) stays ignored. SIGKILL
 * cannot be caught: a folder named ".<name>...-XXXXXX" may then remain.
 */
#ifndef EDGERT_TOOLS_SIGCLEAN_H
#define EDGERT_TOOLS_SIGCLEAN_H

/** Remove `dir` (a whole tree) if one of those signals comes. One folder at a time. */
void sigclean_arm(const char *dir);
/** Back to the handlers before sigclean_arm; the folder is the caller's again. */
void sigclean_disarm(void);
/** While held, a signal waits: it acts at sigclean_release (a rename that
 *  moves the user's earlier output aside must finish first). */
void sigclean_hold(void);
void sigclean_release(void);

#endif
