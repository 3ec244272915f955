/* SPDX-License-Identifier: MIT */
/* pyapi.h - the CPython C API the Python bridge calls, declared by hand (no Python.h at build time)
 * and found with dlsym(RTLD_DEFAULT): a process without CPython never sees the bridge. */
#ifndef SP_PYAPI_H
#define SP_PYAPI_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stddef.h>
#include <sys/types.h>

typedef struct sp_pyobject PyObj; /* PyObject, opaque but for ob_type (sp_py_type_name) */

/* PyMethodDef, as the stable ABI lays it out, and the flags the bridge uses. */
struct sp_pymethod {
	const char *name;
	void *meth;
	int flags;
	const char *doc;
};
#define SP_METH_KEYWORDS 0x0002
#define SP_METH_NOARGS 0x0004
#define SP_METH_O 0x0008
#define SP_METH_FASTCALL 0x0080
#define SP_PY_FILE_INPUT 257 /* Py_file_input */

/* The functions, resolved once (sp_pyapi_resolve). */
extern struct sp_pyapi {
	int minor; /* 3.minor */
	int (*is_initialized)(void);            /* Py_IsInitialized */
	int (*is_finalizing)(void);             /* Py_IsFinalizing (3.13), _Py_IsFinalizing before */
	int (*gil_ensure)(void);                /* PyGILState_Ensure */
	void (*gil_release)(int);               /* PyGILState_Release */
	void *(*save_thread)(void);             /* PyEval_SaveThread */
	void (*restore_thread)(void *);         /* PyEval_RestoreThread */
	int (*at_exit)(void (*)(void));         /* Py_AtExit */
	PyObj *(*modules)(void);                /* PyImport_GetModuleDict: borrowed */
	PyObj *(*dict_get)(PyObj *, const char *); /* PyDict_GetItemString: borrowed, never raises */
	int (*dict_set)(PyObj *, const char *, PyObj *); /* PyDict_SetItemString */
	PyObj *(*dict_new)(void);               /* PyDict_New */
	PyObj *(*getattr)(PyObj *, const char *); /* PyObject_GetAttrString: new */
	PyObj *(*call)(PyObj *, ...);           /* PyObject_CallFunctionObjArgs: new, NULL-terminated */
	PyObj *(*cfunction)(struct sp_pymethod *, PyObj *, PyObj *); /* PyCFunction_NewEx */
	PyObj *(*compile)(const char *, const char *, int); /* Py_CompileString */
	PyObj *(*eval)(PyObj *, PyObj *, PyObj *); /* PyEval_EvalCode */
	PyObj *(*long_from)(long);              /* PyLong_FromLong */
	long (*long_as)(PyObj *);               /* PyLong_AsLong */
	PyObj *(*str)(PyObj *);                 /* PyObject_Str: new */
	const char *(*utf8)(PyObj *);           /* PyUnicode_AsUTF8: borrowed */
	PyObj *(*unicode)(const char *);        /* PyUnicode_FromString: new */
	PyObj *(*occurred)(void);               /* PyErr_Occurred */
	void (*fetch)(PyObj **, PyObj **, PyObj **); /* PyErr_Fetch */
	void (*clear)(void);                    /* PyErr_Clear */
	void (*incref)(PyObj *);                /* Py_IncRef */
	void (*decref)(PyObj *);                /* Py_DecRef */
	PyObj *none; /* &_Py_NoneStruct */
} sp_py;

/* Finds CPython in this process. Returns 1 (sp_py filled), 0 if the process runs no CPython
 * (nothing said), or -1 with why (a CPython the bridge does not know: version, build, a missing
 * symbol). Call once, on one thread. This function can't fail otherwise. */
int sp_pyapi_resolve(char *why, size_t n);
/* The type name of o (its ob_type's tp_name, read from the object's header), "?" if none.
 * With the GIL held. This function can't fail. */
const char *sp_py_type_name(PyObj *o);
/* The pending Python exception in words ("TypeError: ...") into buf, and cleared. With the GIL
 * held. This function can't fail (an exception while describing it is cleared too). */
void sp_py_error(char *buf, size_t n);
/* A new reference to None. */
PyObj *sp_py_none(void);

#endif
