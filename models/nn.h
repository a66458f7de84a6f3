/* models: tensors, layers, ResNets, data and optimizer for training. */
#ifndef FABENCH_NN_H
#define FABENCH_NN_H
#endif
