/* The hidden trailing error argument Go needs on each wrapped method (ERR, or ERR0 for a method
 * with no other argument); nothing in the other languages. %included by accelerate.i for SWIG and
 * #included for the C++ that SWIG copies verbatim (whose wrapper defines SWIGGO for Go too). */
#pragma once

#if defined(SWIGGO)
#define ERR0 std::string *swig_err
#define ERR , std::string *swig_err
#else
#define ERR0
#define ERR
#endif
