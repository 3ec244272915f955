/* SPDX-License-Identifier: MIT */
/* pyapi.c - CPython's C API found in the running process (see pyapi.h). Reads no interpreter
 * structure beyond an object's type name (the object header of 3.10-3.13 GIL builds, as
 * collector/stacks/pystack.c reads it). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "pyapi.h"

struct sp_pyapi sp_py;

#define OB_TYPE 8  /* PyObject.ob_type (after ob_refcnt) */
#define TP_NAME 24 /* PyTypeObject.tp_name (after the variable object header) */

/* dlsym into *slot; counts what is missing in *missing (its name in miss). */
#define FIND(slot, name)                                         \
	do {                                                     \
		*(void **)&(slot) = dlsym(RTLD_DEFAULT, name);   \
		if (!(slot) && !*miss)                           \
			snprintf(miss, sizeof miss, "%s", name); \
	} while (0)

/* The functions every supported version has. Returns 0, or -1 with the first missing name in why. */
static int find_all(char *why, size_t n)
{
	char miss[64] = "";
	FIND(sp_py.gil_ensure, "PyGILState_Ensure");
	FIND(sp_py.gil_release, "PyGILState_Release");
	FIND(sp_py.save_thread, "PyEval_SaveThread");
	FIND(sp_py.restore_thread, "PyEval_RestoreThread");
	FIND(sp_py.at_exit, "Py_AtExit");
	FIND(sp_py.modules, "PyImport_GetModuleDict");
	FIND(sp_py.dict_get, "PyDict_GetItemString");
	FIND(sp_py.dict_set, "PyDict_SetItemString");
	FIND(sp_py.dict_new, "PyDict_New");
	FIND(sp_py.getattr, "PyObject_GetAttrString");
	FIND(sp_py.call, "PyObject_CallFunctionObjArgs");
	FIND(sp_py.cfunction, "PyCFunction_NewEx");
	FIND(sp_py.compile, "Py_CompileString");
	FIND(sp_py.eval, "PyEval_EvalCode");
	FIND(sp_py.long_from, "PyLong_FromLong");
	FIND(sp_py.long_as, "PyLong_AsLong");
	FIND(sp_py.str, "PyObject_Str");
	FIND(sp_py.utf8, "PyUnicode_AsUTF8");
	FIND(sp_py.unicode, "PyUnicode_FromString");
	FIND(sp_py.occurred, "PyErr_Occurred");
	FIND(sp_py.fetch, "PyErr_Fetch");
	FIND(sp_py.clear, "PyErr_Clear");
	FIND(sp_py.incref, "Py_IncRef");
	FIND(sp_py.decref, "Py_DecRef");
	FIND(sp_py.none, "_Py_NoneStruct");
	if (!miss[0])
		return 0;
	snprintf(why, n, "a symbol is missing: %s", miss);
	return -1;
}

int sp_pyapi_resolve(char *why, size_t n)
{
	const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
	*(void **)&sp_py.is_initialized = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	if (!version || !sp_py.is_initialized)
		return 0; /* no CPython here */
	const char *v = version();
	int major = 0, minor = 0;
	if (!v || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 3 || minor < 10 || minor > 13) {
		snprintf(why, n, "Python %.20s: the bridge knows CPython 3.10 to 3.13", v ? v : "?");
		return -1;
	}
	sp_py.minor = minor;
	/* its version says so; its refcount functions too (defined in free-threading builds only) */
	if (strstr(v, "free-threading") || strstr(v, "experimental free") ||
	    dlsym(RTLD_DEFAULT, "_Py_MergeZeroLocalRefcount") || dlsym(RTLD_DEFAULT, "_Py_DecRefShared")) {
		snprintf(why, n, "Python %d.%d: a free-threading build (the bridge relies on the GIL)", major, minor);
		return -1;
	}
	if (dlsym(RTLD_DEFAULT, "_Py_RefTotal") || dlsym(RTLD_DEFAULT, "_Py_GetRefTotal")) {
		snprintf(why, n, "Python %d.%d: a debug build", major, minor);
		return -1;
	}
	*(void **)&sp_py.is_finalizing = dlsym(RTLD_DEFAULT, "Py_IsFinalizing")
						 ? dlsym(RTLD_DEFAULT, "Py_IsFinalizing")
						 : dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
	if (!sp_py.is_finalizing) {
		snprintf(why, n, "Python %d.%d: a symbol is missing: Py_IsFinalizing", major, minor);
		return -1;
	}
	return find_all(why, n) < 0 ? -1 : 1;
}

const char *sp_py_type_name(PyObj *o)
{
	const char *const *tp = o ? *(const char *const **)((const char *)o + OB_TYPE) : NULL;
	const char *name = tp ? *(const char *const *)((const char *)tp + TP_NAME) : NULL;
	return name ? name : "?";
}

void sp_py_error(char *buf, size_t n)
{
	PyObj *type = NULL, *value = NULL, *tb = NULL;
	snprintf(buf, n, "unknown error");
	if (!sp_py.occurred())
		return;
	sp_py.fetch(&type, &value, &tb);
	/* type is a type object: its own tp_name is at TP_NAME */
	const char *tn = type ? *(const char *const *)((const char *)type + TP_NAME) : "?";
	PyObj *s = value ? sp_py.str(value) : NULL;
	const char *msg = s ? sp_py.utf8(s) : NULL;
	snprintf(buf, n, "%.60s%s%.200s", tn ? tn : "?", msg && *msg ? ": " : "", msg ? msg : "");
	if (s)
		sp_py.decref(s);
	sp_py.clear(); /* anything describing it raised */
	if (type)
		sp_py.decref(type);
	if (value)
		sp_py.decref(value);
	if (tb)
		sp_py.decref(tb);
}

PyObj *sp_py_none(void)
{
	sp_py.incref(sp_py.none);
	return sp_py.none;
}
