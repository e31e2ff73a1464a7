"""codesign/step/fpmac_array"""
